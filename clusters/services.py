"""What a user can do to a cluster and its membership (docs/rules.md#the-rules). Nothing else
writes them.

Each action runs in one transaction, locks rows in the fixed order of ``clusters.locking``,
checks the actor's permission and the rules, raises a typed error (``portal.foundation.errors``),
audits the attempt and queues the slow part (``actor=None``: the system).

Each rule is once, a ``*_refusal`` function of the facts it needs: the action raises it on
the locked rows, its ``preflight_*`` twin returns it on the rows as read (a page disables a
button and says why). The background walk is ``clusters.progress``.
"""

import itertools
import logging
from collections.abc import Callable, Collection, Iterable
from typing import cast

from clusters import cluster_key
from clusters.events import move_cluster
from clusters.holds import hold_refusal
from clusters.locking import (
    VM_STATE_FIELDS,
    clear_fabric,
    lock_cluster,
    lock_members,
    lock_vm,
    lock_vm_with_cluster,
    save_cluster,
    save_vm,
)
from clusters.models import (
    DELETABLE,
    MEMBERSHIP_OPEN,
    MIN_MEMBERS,
    STARTABLE,
    STOPPABLE,
    ClusterOp,
    ClusterSpare,
    ClusterStatus,
    VirtualCluster,
)
from clusters.models import (
    MemberStates as MemberStates,  # the preflights' argument, named from here by the pages
)
from portal.catalog.models import FabricType, InstanceType, Zone
from portal.catalog.rules import catalog_choice, offered_fabrics
from portal.compute.backends import get_backend
from portal.foundation.audit import Attempt, attempt
from portal.foundation.errors import (
    AlreadyMember,
    BackendError,
    CapacityUnavailable,
    ClusterChanging,
    ClusterNotFound,
    FabricNotOffered,
    FabricRequired,
    InstanceTypeRequired,
    InvalidTransition,
    MembersStillRunning,
    NameTaken,
    NotEnoughMembers,
    NotMember,
    RuleViolation,
    SpotOrDrVm,
    VmInOtherZone,
    VmNotEligible,
    VmNotStopped,
    VmOfOtherInstanceType,
    ZoneRequired,
)
from portal.foundation.kernel import (
    Actor,
    Refusal,
    begin_create,
    permission_refusal,
    queue_after_commit,
    raise_if,
    recorded_user,
    rename,
    save_unique,
)
from portal.iam import ssh_keys
from portal.iam.permissions import Perm
from portal.models import Project
from vms.models import BillingType, VirtualMachine, VmStatus

log = logging.getLogger(__name__)


def queue_advance(cluster: VirtualCluster) -> None:
    queue_after_commit("clusters.tasks.advance_cluster", cluster.pk, cluster.generation)


def queue_release(cluster: VirtualCluster) -> None:
    queue_after_commit("clusters.tasks.release_cluster", cluster.pk)


# ---------------------------------------------------------------------------------------------
# The rules, each once


def start_refusal(cluster: VirtualCluster, members: MemberStates) -> RuleViolation | None:
    """From 미할당/종료됨, with at least 2 members (docs/rules.md#starting-a-cluster)."""
    if cluster.status not in STARTABLE:
        return InvalidTransition()
    if members.count < MIN_MEMBERS:
        return NotEnoughMembers()
    return None


def _members_stopped_refusal(
    cluster: VirtualCluster, members: MemberStates, sources: Collection[str]
) -> RuleViolation | None:
    """From one of ``sources`` only, and not while a member runs or is in transition."""
    if cluster.status not in sources:
        return InvalidTransition()
    if members.active:
        return MembersStillRunning()
    return None


def stop_refusal(cluster: VirtualCluster, members: MemberStates) -> RuleViolation | None:
    """Not while a member runs or is in transition (docs/rules.md#stopping-a-cluster)."""
    return _members_stopped_refusal(cluster, members, STOPPABLE)


def delete_refusal(cluster: VirtualCluster, members: MemberStates) -> RuleViolation | None:
    """From 미할당/종료됨, all members stopped (docs/rules.md#deleting-a-cluster)."""
    return _members_stopped_refusal(cluster, members, DELETABLE)


def create_refusal(
    project: Project,
    name: str,
    zone: Zone | None,
    instance_type: InstanceType | None,
    fabric_type: str | None,
) -> RuleViolation | None:
    """A zone, an instance type offering ``fabric_type`` there, and a name no live cluster of
    the project has (``name`` already passed the name rule): docs/rules.md#creating-a-cluster."""
    if zone is None:
        return ZoneRequired()
    if instance_type is None:
        return InstanceTypeRequired()
    if fabric_type not in FabricType.values:
        return FabricRequired()
    if fabric_type not in offered_fabrics(zone.pk, instance_type.pk):
        return FabricNotOffered()
    return rename_refusal(VirtualCluster(project=project), name)


def rename_refusal(cluster: VirtualCluster, name: str) -> RuleViolation | None:
    """Not a deleted cluster; a name no other live cluster of its project has."""
    if cluster.status == ClusterStatus.DELETED:
        return InvalidTransition()
    if cluster.pk is not None and name == cluster.name:
        return None  # its own name: no other live cluster has it (the unique constraint)
    taken = VirtualCluster.objects.alive().filter(project_id=cluster.project_id, name=name)
    return NameTaken() if taken.exclude(pk=cluster.pk).exists() else None


def membership_refusal(cluster: VirtualCluster) -> RuleViolation | None:
    """Whether any VM may join or leave ``cluster`` now: not while it changes state, never
    once deleted (``ClusterChanging``). What a page says beside 가상머신 연결."""
    return None if cluster.status in MEMBERSHIP_OPEN else ClusterChanging()


def vm_attach_refusal(vm: VirtualMachine) -> RuleViolation | None:
    """What refuses ``vm`` for any cluster: spot or DR (``SpotOrDrVm``), or not stopped."""
    if vm.billing_type == BillingType.SPOT or vm.disaster_recovery:
        return SpotOrDrVm()
    if vm.status != VmStatus.STOPPED:
        return VmNotEligible()
    return None


def attach_refusal(vm: VirtualMachine, cluster: VirtualCluster) -> RuleViolation | None:
    """docs/rules.md#attaching-a-vm: same project; the VM in no cluster; membership open; an
    on-demand or reserved VM of the cluster's zone and instance type (each named), stopped.
    What stopping cannot fix is said first. ``vm`` may be unsaved: VM create asks before it
    makes one."""
    if vm.project_id != cluster.project_id or cluster.status == ClusterStatus.DELETED:
        return ClusterNotFound()
    if vm.cluster_id is not None:
        return AlreadyMember()
    if refusal := membership_refusal(cluster):
        return refusal
    return fit_refusal(vm, cluster)


def fit_refusal(vm: VirtualMachine, cluster: VirtualCluster) -> RuleViolation | None:
    """What refuses ``vm`` as a node of ``cluster`` whatever its membership (an attach, a
    예비): spot or DR, another zone or instance type (each named), not stopped."""
    if vm.billing_type == BillingType.SPOT or vm.disaster_recovery:
        return SpotOrDrVm()
    if vm.zone_id != cluster.zone_id:
        return VmInOtherZone(zone=vm.zone.code)
    if vm.instance_type_id != cluster.instance_type_id:
        return VmOfOtherInstanceType(instance_type=vm.instance_type.code)
    return vm_attach_refusal(vm)


def detach_refusal(
    vm: VirtualMachine, cluster: VirtualCluster | None, members: MemberStates
) -> RuleViolation | None:
    """A stopped member, membership open, and a running cluster keeps 2
    (docs/rules.md#detaching-a-vm)."""
    if cluster is None:
        return NotMember()
    if refusal := membership_refusal(cluster):
        return refusal
    if vm.status != VmStatus.STOPPED:
        return VmNotStopped()
    if cluster.status == ClusterStatus.RUNNING and members.count - 1 < MIN_MEMBERS:
        return NotEnoughMembers()
    return None


# ---------------------------------------------------------------------------------------------
# Preflights: the refusal an action would raise now (or None), changing nothing


def preflight_start(actor: Actor, cluster: VirtualCluster, members: MemberStates) -> Refusal:
    return permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or start_refusal(
        cluster, members
    )


def preflight_stop(actor: Actor, cluster: VirtualCluster, members: MemberStates) -> Refusal:
    return permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or stop_refusal(cluster, members)


def preflight_delete(actor: Actor, cluster: VirtualCluster, members: MemberStates) -> Refusal:
    return permission_refusal(actor, Perm.CLUSTER_DELETE, cluster) or delete_refusal(
        cluster, members
    )


def preflight_create(
    actor: Actor,
    project: Project,
    name: str,
    zone: Zone | None,
    instance_type: InstanceType | None,
    fabric_type: str | None,
) -> Refusal:
    return permission_refusal(actor, Perm.CLUSTER_CREATE, project) or create_refusal(
        project, name, zone, instance_type, fabric_type
    )


def preflight_rename(actor: Actor, cluster: VirtualCluster, name: str) -> Refusal:
    return permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or rename_refusal(cluster, name)


def preflight_attach(actor: Actor, vm: VirtualMachine, cluster: VirtualCluster) -> Refusal:
    return permission_refusal(actor, Perm.VM_UPDATE, vm) or attach_refusal(vm, cluster)


def preflight_detach(
    actor: Actor, vm: VirtualMachine, cluster: VirtualCluster | None, members: MemberStates
) -> Refusal:
    return permission_refusal(actor, Perm.VM_UPDATE, vm) or detach_refusal(vm, cluster, members)


# ---------------------------------------------------------------------------------------------
# User actions


def create_cluster(
    *,
    actor: Actor,
    project: Project,
    name: str | None,
    zone_id: object,
    instance_type_id: object,
    fabric_type: str | None,
    ssh_key_ids: Iterable[object] | None = None,
) -> VirtualCluster:
    """Create an empty cluster in 준비중 (a task moves it to 미할당): CREATE permission in
    ``project``, the name rule, then ``create_refusal``; it holds the project's SSH keys
    ``ssh_key_ids`` names (``ssh_keys.chosen_keys``: another project's key, or one the actor
    may not read, is not found and nothing is created)."""
    with attempt("cluster.create", actor=actor, target_type="cluster") as att:
        name = begin_create(att, actor, Perm.CLUSTER_CREATE, project, name)
        att.target_name = name
        zone, instance_type = catalog_choice(zone_id, instance_type_id)
        raise_if(create_refusal(project, name, zone, instance_type, fabric_type))
        keys = ssh_keys.chosen_keys(actor, project, ssh_key_ids)
        cluster = VirtualCluster(
            project=project,
            name=name,
            zone=zone,
            instance_type=instance_type,
            fabric_type=cast(str, fabric_type),  # one of FabricType's: create_refusal said so
            status=ClusterStatus.PROVISIONING,
            operation=ClusterOp.CREATE,
            created_by=recorded_user(actor),
        )
        save_unique(cluster, NameTaken)
        cluster.ssh_keys.set(keys)
        att.about(cluster)
        queue_advance(cluster)
    return cluster


def _locked(
    cluster_id: object,
    actor: Actor,
    perm: str,
    att: Attempt,
    refusal: Callable[[VirtualCluster, MemberStates], Refusal],
) -> tuple[VirtualCluster, list[VirtualMachine]]:
    """The cluster and its members, locked in order, once ``refusal`` let them pass."""
    cluster = lock_cluster(cluster_id, actor, perm, att)
    members = lock_members(cluster)
    raise_if(refusal(cluster, MemberStates.of(vm.status for vm in members)))
    return cluster, members


def start_cluster(cluster_id: object, *, actor: Actor) -> VirtualCluster:
    """미할당/종료됨 → 준비중 (→ 할당됨 → 대기중 → 실행중 by tasks). Needs 2+ members.
    Every start gives the cluster a new SSH key pair (``clusters.cluster_key.rotate``)."""
    with attempt("cluster.start", actor=actor, target_type="cluster") as att:
        cluster, members = _locked(cluster_id, actor, Perm.CLUSTER_UPDATE, att, start_refusal)
        cluster.previous_status = cluster.status
        move_cluster(cluster, ClusterStatus.PROVISIONING)
        cluster.operation = ClusterOp.START
        cluster.generation += 1
        cluster.set_error(None)
        save_cluster(cluster)
        cluster_key.rotate(cluster)
        queue_advance(cluster)
        att.notice("start_requested")  # accepted, not done: a worker takes it on
    return cluster


def stop_cluster(cluster_id: object, *, actor: Actor) -> VirtualCluster:
    """실행중/할당됨/대기중 → 종료됨, releasing the fabric. Refused while a member runs."""
    with attempt("cluster.stop", actor=actor, target_type="cluster") as att:
        cluster, members = _locked(cluster_id, actor, Perm.CLUSTER_UPDATE, att, stop_refusal)
        for vm in members:
            clear_fabric(vm)
            save_vm(vm)
        _settle_and_release(cluster, ClusterStatus.TERMINATED)
    return cluster


def delete_cluster(cluster_id: object, *, actor: Actor) -> VirtualCluster:
    """미할당/종료됨 → 삭제됨; members are detached and stay as ordinary VMs, and its 예비
    are let go (docs/rules.md#spares)."""
    with attempt("cluster.delete", actor=actor, target_type="cluster") as att:
        cluster, members = _locked(cluster_id, actor, Perm.CLUSTER_DELETE, att, delete_refusal)
        for vm in members:
            leave(vm)
        ClusterSpare.objects.filter(cluster=cluster).delete()
        _settle_and_release(cluster, ClusterStatus.DELETED)
        att.notice("members_detached", count=len(members))
    return cluster


def _settle_and_release(cluster: VirtualCluster, status: str) -> None:
    """The end of a stop or a delete, once its members are dealt with: the cluster settles
    at ``status`` with no operation running, and its fabric is released after commit."""
    move_cluster(cluster, status)
    cluster.operation = ClusterOp.NONE
    save_cluster(cluster)
    queue_release(cluster)


def attach_vm(vm_id: object, cluster_id: object, *, actor: Actor) -> VirtualMachine:
    """Make a stopped on-demand/reserved VM of the cluster's zone and type a member: VM
    UPDATE and cluster READ, ``attach_refusal`` (docs/rules.md#attaching-a-vm), then
    ``reserve_node``."""
    with attempt("vm.attach", actor=actor, target_type="vm") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_READ)
        vm = lock_vm(vm_id, actor, Perm.VM_UPDATE, att)
        if vm.project_id == cluster.project_id:
            att.message = cluster.name
            att.cluster_id = cluster.pk
        raise_if(attach_refusal(vm, cluster) or hold_refusal(vm))
        members = len(lock_members(cluster)) if cluster.status == ClusterStatus.RUNNING else 0
        raise_if(reserve_node(cluster, members))
        join(vm, cluster)
    return vm


def reserve_node(cluster: VirtualCluster, members: int) -> RuleViolation | None:
    """An attach's step once the rules said yes: a running cluster's fabric grows with it,
    so member ``members + 1``'s node is reserved now, or its capacity or backend error."""
    if cluster.status != ClusterStatus.RUNNING:
        return None
    try:
        get_backend().allocate(cluster, members + 1)
    except (CapacityUnavailable, BackendError) as exc:
        return exc
    return None


def join(vm: VirtualMachine, cluster: VirtualCluster, rank: int | None = None) -> None:
    """An attach's write, once ``attach_refusal`` said yes (the caller holds both locks).
    The VM takes ``rank`` (a 교체 spare: the replaced member's) or the lowest node rank no
    member holds, so the members' order (torchrun, hostfile) survives detaches and swaps."""
    if rank is None:
        taken = set(cluster.members.exclude(pk=vm.pk).values_list("node_rank", flat=True))
        rank = next(r for r in itertools.count() if r not in taken)
    vm.cluster, vm.node_rank = cluster, rank
    vm.save(update_fields=[*VM_STATE_FIELDS, "node_rank"])
    _members_changed(cluster)


def _members_changed(cluster: VirtualCluster | None) -> None:
    """A failed start's error speaks of the members it was asked for ("요청 2노드, 가용
    1노드"): once they change it no longer holds, and the cluster keeps no last error (the
    활동 tab keeps it)."""
    if cluster is not None and cluster.error_code:
        cluster.set_error(None)
        cluster.save(update_fields=["error_code", "error_params"])


def leave(vm: VirtualMachine) -> None:
    """A detach's write, once ``detach_refusal`` said yes (the caller holds both locks).
    The backend takes back the member's fabric devices; if it cannot now, its next start
    (defined from the VM's current membership) and the next allocation do."""
    cluster = vm.cluster
    vm.cluster, vm.node_rank = None, None
    clear_fabric(vm)
    vm.save(update_fields=[*VM_STATE_FIELDS, "node_rank"])
    _members_changed(cluster)
    try:
        get_backend().leave_cluster(vm, cluster)
    except BackendError:
        log.warning("backend kept %s's devices of cluster %s for now", vm.pk, cluster.pk)


def detach_vm(vm_id: object, *, actor: Actor) -> VirtualMachine:
    """Take a stopped VM out of its cluster; a running cluster keeps at least 2 members."""
    with attempt("vm.detach", actor=actor, target_type="vm") as att:
        cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        if cluster is not None:
            att.message = cluster.name
            att.cluster_id = cluster.pk
        members = MemberStates.read(cluster) if cluster is not None else MemberStates()
        raise_if(detach_refusal(vm, cluster, members))
        leave(vm)
    return vm


def rename_cluster(cluster_id: object, *, actor: Actor, name: str | None) -> VirtualCluster:
    """A new name, by the name rule and ``rename_refusal`` (CLUSTER UPDATE). Zone, type and
    fabric never change (docs/rules.md#creating-a-cluster): the name and the SSH keys
    (``set_cluster_ssh_keys``) are what changes."""
    with attempt("cluster.update", actor=actor, target_type="cluster") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_UPDATE, att)
        rename(cluster, name, att, rename_refusal, NameTaken)
    return cluster


def ssh_keys_refusal(cluster: VirtualCluster) -> RuleViolation | None:
    """Any cluster but a deleted one, in any other status: the keys reach each member at its
    next start."""
    return InvalidTransition() if cluster.status == ClusterStatus.DELETED else None


def preflight_ssh_keys(
    actor: Actor, cluster: VirtualCluster, ssh_key_ids: Iterable[object] | None = None
) -> Refusal:
    """Whether ``set_cluster_ssh_keys`` would refuse (and with ``ssh_key_ids``, those keys)."""
    refusal = permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or ssh_keys_refusal(cluster)
    if refusal is None:
        try:
            ssh_keys.chosen_keys(actor, cluster.project, ssh_key_ids)
        except RuleViolation as exc:
            return exc
    return refusal


def set_cluster_ssh_keys(
    cluster_id: object, *, actor: Actor, ssh_key_ids: Iterable[object] | None
) -> VirtualCluster:
    """The project's SSH keys the cluster's members get beside their own, from each
    member's next start (CLUSTER UPDATE, ``ssh_keys_refusal``): the set ``ssh_key_ids``
    names, replacing the one before (none: the cluster adds no key). A key not found
    (another project's, one the actor may not read, a deleted one) changes nothing."""
    with attempt("cluster.ssh_keys", actor=actor, target_type="cluster") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_UPDATE, att)
        raise_if(ssh_keys_refusal(cluster))
        keys = ssh_keys.chosen_keys(actor, cluster.project, ssh_key_ids)
        cluster.ssh_keys.set(keys)
        att.message = ", ".join(key.name for key in keys)
    return cluster
