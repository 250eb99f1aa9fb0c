"""What a user can do to a VM (docs/rules.md#starting-stopping-and-deleting-a-vm). Membership
lives in ``clusters.services``.

Same discipline as there: one transaction, the VM's cluster locked before the VM
(``clusters.locking``), a typed error with the user's message, an audit event, the slow part
queued on commit (``vms.progress`` finishes it). Each rule is one ``*_refusal`` function; its
``preflight_*`` twin answers "would this be refused?" for the pages.
"""

from collections.abc import Iterable

from celery import Task

from clusters.holds import hold_refusal
from clusters.locking import lock_vm_with_cluster, save_vm
from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricOffering, InstanceType, Zone
from portal.catalog.rules import catalog_choice
from portal.compute.backends import get_backend
from portal.foundation.audit import attempt
from portal.foundation.errors import (
    BillingTypeRequired,
    ClusterNotRunning,
    InstanceTypeNotOffered,
    InvalidTransition,
    RuleViolation,
    VmIsMember,
    VmNameTaken,
    VmNotStopped,
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
    set_status,
)
from portal.iam import ssh_keys
from portal.iam.permissions import Perm
from portal.models import Project
from vms import tasks
from vms.models import (
    VM_LIFECYCLE,
    VM_STARTABLE,
    VM_STOPPABLE,
    BillingType,
    VirtualMachine,
    VmStatus,
)


def _move(vm: VirtualMachine, status: str, task: "Task[..., object]") -> None:
    """An action's write once its rules said yes: ``vm`` moves to ``status`` by its
    lifecycle, is saved, and ``task`` finishes the slow part after commit."""
    set_status(vm, status, VM_LIFECYCLE)
    save_vm(vm)
    queue_after_commit(task, vm.pk)


# ---------------------------------------------------------------------------------------------
# The rules, each once, and their preflights


def start_refusal(vm: VirtualMachine, cluster: VirtualCluster | None) -> RuleViolation | None:
    """A stopped VM starts; a member only while its cluster is 실행중 (``ClusterNotRunning``)."""
    if vm.status not in VM_STARTABLE:
        return InvalidTransition()
    if cluster is not None and cluster.status != ClusterStatus.RUNNING:
        return ClusterNotRunning()
    return None


def stop_refusal(vm: VirtualMachine) -> RuleViolation | None:
    if vm.status not in VM_STOPPABLE:
        return InvalidTransition()
    return None


def delete_refusal(vm: VirtualMachine) -> RuleViolation | None:
    """A member is detached first; only a stopped VM is deleted."""
    if vm.cluster_id is not None:
        return VmIsMember()
    if vm.status != VmStatus.STOPPED:
        return VmNotStopped()
    return None


def create_refusal(
    project: Project,
    name: str,
    zone: Zone | None,
    instance_type: InstanceType | None,
    billing_type: str | None,
) -> RuleViolation | None:
    """A zone, an instance type offered there, a billing type, and a name no live VM of the
    project has (``name`` already passed the name rule)."""
    if zone is None:
        return ZoneRequired()
    offered = FabricOffering.objects.filter(zone=zone, instance_type=instance_type)
    if instance_type is None or not offered.exists():
        return InstanceTypeNotOffered()
    if billing_type not in BillingType.values:
        return BillingTypeRequired()
    return rename_refusal(VirtualMachine(project=project), name)


def rename_refusal(vm: VirtualMachine, name: str) -> RuleViolation | None:
    """A name no other live VM of its project has."""
    if vm.pk is not None and name == vm.name:
        return None  # its own name: no other live VM has it (the unique constraint)
    taken = VirtualMachine.objects.alive().filter(project_id=vm.project_id, name=name)
    return VmNameTaken() if taken.exclude(pk=vm.pk).exists() else None


def preflight_create(
    actor: Actor,
    project: Project,
    name: str,
    zone: Zone | None,
    instance_type: InstanceType | None,
    billing_type: str | None,
) -> Refusal:
    return permission_refusal(actor, Perm.VM_CREATE, project) or create_refusal(
        project, name, zone, instance_type, billing_type
    )


def preflight_rename(actor: Actor, vm: VirtualMachine, name: str) -> RuleViolation | None:
    return permission_refusal(actor, Perm.VM_UPDATE, vm) or rename_refusal(vm, name)


def preflight_start(
    actor: Actor, vm: VirtualMachine, cluster: VirtualCluster | None
) -> RuleViolation | None:
    """``cluster`` is the VM's cluster as read (or None)."""
    return permission_refusal(actor, Perm.VM_UPDATE, vm) or start_refusal(vm, cluster)


def preflight_stop(actor: Actor, vm: VirtualMachine) -> RuleViolation | None:
    return permission_refusal(actor, Perm.VM_UPDATE, vm) or stop_refusal(vm)


def preflight_delete(actor: Actor, vm: VirtualMachine) -> RuleViolation | None:
    return permission_refusal(actor, Perm.VM_DELETE, vm) or delete_refusal(vm)


# ---------------------------------------------------------------------------------------------
# User actions


def create_vm(
    *,
    actor: Actor,
    project: Project,
    name: str | None,
    zone_id: object,
    instance_type_id: object,
    billing_type: str,
    disaster_recovery: bool = False,
    ssh_key_ids: Iterable[object] | None = None,
) -> VirtualMachine:
    """Create a stopped VM (중지됨) with a private IP from the backend, carrying the
    project's SSH keys ``ssh_key_ids`` names (``ssh_keys.chosen_keys``: another project's
    key, or one the actor may not read, is not found)."""
    with attempt("vm.create", actor=actor, target_type="vm") as att:
        name = begin_create(att, actor, Perm.VM_CREATE, project, name)
        zone, instance_type = catalog_choice(zone_id, instance_type_id)
        raise_if(create_refusal(project, name, zone, instance_type, billing_type))
        keys = ssh_keys.chosen_keys(actor, project, ssh_key_ids)
        vm = VirtualMachine(
            project=project,
            name=name,
            zone=zone,
            instance_type=instance_type,
            billing_type=billing_type,
            disaster_recovery=bool(disaster_recovery),
            created_by=recorded_user(actor),
        )
        save_unique(vm, VmNameTaken)
        vm.ssh_keys.set(keys)
        vm.private_ip = get_backend().create_vm(vm)
        vm.save(update_fields=["private_ip"])
        att.about(vm)
    return vm


def rename_vm(vm_id: object, *, actor: Actor, name: str | None) -> VirtualMachine:
    with attempt("vm.update", actor=actor, target_type="vm") as att:
        _cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        rename(vm, name, att, rename_refusal, VmNameTaken)
    return vm


def start_vm(vm_id: object, *, actor: Actor) -> VirtualMachine:
    """중지됨 → 시작중 (→ 실행중 by a task). A member starts only in a running cluster."""
    with attempt("vm.start", actor=actor, target_type="vm") as att:
        cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        raise_if(start_refusal(vm, cluster) or hold_refusal(vm))
        vm.set_error(None)
        _move(vm, VmStatus.STARTING, tasks.advance_vm)
    return vm


def stop_vm(vm_id: object, *, actor: Actor) -> VirtualMachine:
    """실행중/오류 → 중지중 (→ 중지됨 by a task)."""
    with attempt("vm.stop", actor=actor, target_type="vm") as att:
        _cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        raise_if(stop_refusal(vm))
        _move(vm, VmStatus.STOPPING, tasks.advance_vm)
    return vm


def delete_vm(vm_id: object, *, actor: Actor) -> VirtualMachine:
    with attempt("vm.delete", actor=actor, target_type="vm") as att:
        _cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_DELETE, att)
        raise_if(delete_refusal(vm) or hold_refusal(vm))
        _move(vm, VmStatus.DELETED, tasks.delete_vm_resources)
    return vm
