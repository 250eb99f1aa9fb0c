"""A cluster's 예비 (spares): stopped VMs of its zone and instance type that it keeps for its
교체 (docs/rules.md#spares).

A spare is no member (it has no ``cluster`` and no rank), so metrics, 검증 and the straggler
never count it; it is held for its cluster (``clusters.holds``: starting, deleting or
attaching it elsewhere is refused with ``VmIsSpare``) until it is taken out of the spares or a
교체 makes it a member (``leave_pool``). Adding and removing need CLUSTER UPDATE on the
cluster and VM UPDATE on the VM, as an attach needs VM UPDATE.
"""

from clusters import services
from clusters.holds import hold_refusal, holding_replace, spare_pool_of
from clusters.locking import lock_cluster, lock_vm
from clusters.models import ClusterSpare, ClusterStatus, Verdict, VirtualCluster
from clusters.validation.display import vm_verdicts
from portal.compute.models import Placement
from portal.foundation.audit import attempt
from portal.foundation.errors import (
    AlreadyMember,
    ClusterNotFound,
    NotSpare,
    RuleViolation,
    SpareIsolated,
    VmHeldForReplace,
    VmIsSpare,
)
from portal.foundation.kernel import Actor, permission_refusal, raise_if, recorded_user
from portal.iam.permissions import Perm
from portal.models import readable
from vms.models import VirtualMachine, VmHealth, VmStatus


def spare_refusal(spare: VirtualMachine) -> RuleViolation | None:
    """A VM isolated by its health (``vms.health``: a 검증 judged it 불량) is no spare."""
    return SpareIsolated() if spare.health == VmHealth.ISOLATED else None


def add_spare_refusal(vm: VirtualMachine, cluster: VirtualCluster) -> RuleViolation | None:
    """Whether ``vm`` may become a 예비 of ``cluster``: same project and the cluster not
    deleted, in no cluster, no spare already, a node the cluster could take (``fit_refusal``:
    on-demand or reserved, its zone and type, stopped), not held by a 교체, not 격리."""
    if vm.project_id != cluster.project_id or cluster.status == ClusterStatus.DELETED:
        return ClusterNotFound()
    if vm.cluster_id is not None:
        return AlreadyMember()
    if spare_pool_of(vm) is not None:
        return VmIsSpare()
    return services.fit_refusal(vm, cluster) or hold_refusal(vm) or spare_refusal(vm)


def remove_spare_refusal(vm: VirtualMachine, cluster: VirtualCluster) -> RuleViolation | None:
    """Whether ``vm`` may leave ``cluster``'s spares: it is one, and no 교체 holds it now."""
    if spare_pool_of(vm) != cluster.pk:
        return NotSpare()
    return VmHeldForReplace() if holding_replace(vm) is not None else None


def permission_for_spares(actor: Actor, cluster: VirtualCluster) -> RuleViolation | None:
    """CLUSTER UPDATE, then VM UPDATE in the cluster's project: what any change of its
    spares needs, asked before the VM is read."""
    return permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or permission_refusal(
        actor, Perm.VM_UPDATE, cluster
    )


def preflight_add_spare(
    actor: Actor, cluster: VirtualCluster, vm: VirtualMachine | None = None
) -> RuleViolation | None:
    """What the 예비 section says before 예비 추가 (without ``vm``: the permission only)."""
    return permission_for_spares(actor, cluster) or (
        add_spare_refusal(vm, cluster) if vm is not None else None
    )


def preflight_remove_spare(
    actor: Actor, cluster: VirtualCluster, vm: VirtualMachine
) -> RuleViolation | None:
    return permission_for_spares(actor, cluster) or remove_spare_refusal(vm, cluster)


def _locked(cluster_id: object, vm_id: object, actor: Actor, att) -> tuple:
    cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_UPDATE, att)
    raise_if(permission_refusal(actor, Perm.VM_UPDATE, cluster))
    vm = lock_vm(vm_id, actor, Perm.VM_UPDATE)
    att.message = vm.name
    return cluster, vm


def add_spare(cluster_id: object, vm_id: object, *, actor: Actor) -> VirtualMachine:
    """Keep ``vm`` as a 예비 of the cluster (``add_spare_refusal`` on the locked rows)."""
    with attempt("cluster.spare_add", actor=actor, target_type="cluster") as att:
        cluster, vm = _locked(cluster_id, vm_id, actor, att)
        raise_if(add_spare_refusal(vm, cluster))
        ClusterSpare.objects.create(cluster=cluster, vm=vm, added_by=recorded_user(actor))
    return vm


def remove_spare(cluster_id: object, vm_id: object, *, actor: Actor) -> VirtualMachine:
    """Take ``vm`` out of the cluster's spares: an ordinary stopped VM again."""
    with attempt("cluster.spare_remove", actor=actor, target_type="cluster") as att:
        cluster, vm = _locked(cluster_id, vm_id, actor, att)
        raise_if(remove_spare_refusal(vm, cluster))
        ClusterSpare.objects.filter(vm=vm).delete()
    return vm


def leave_pool(vm: VirtualMachine) -> None:
    """A spare that joins its cluster (a 교체) is a member, no spare any more."""
    ClusterSpare.objects.filter(vm_id=vm.pk).delete()


def spares_of(cluster: VirtualCluster) -> list[VirtualMachine]:
    """The cluster's spares, the longest kept first."""
    rows = ClusterSpare.objects.filter(cluster=cluster).select_related(
        "vm__zone", "vm__instance_type"
    )
    return [row.vm for row in rows.order_by("added_at", "pk")]


def spare_candidates(actor: Actor, cluster: VirtualCluster) -> list[VirtualMachine]:
    """The project's VMs the actor could add as spares now (the 예비 추가 picker)."""
    vms = (
        readable(actor, Perm.VM_READ, VirtualMachine)
        .filter(
            project_id=cluster.project_id,
            cluster__isnull=True,
            spare_of__isnull=True,
            zone_id=cluster.zone_id,
            instance_type_id=cluster.instance_type_id,
            status=VmStatus.STOPPED,
        )
        .select_related("zone", "instance_type")
        .order_by("name", "pk")
    )
    return [vm for vm in vms if add_spare_refusal(vm, cluster) is None]


def _slot(vm_ids) -> dict[int, tuple[str, str]]:
    """Each VM's place in the fabric's topology, (block, leaf) of the host it runs on (the
    libvirt backend's placement; none on the simulator)."""
    rows = Placement.objects.filter(vm_id__in=list(vm_ids)).select_related("host", "domain_host")
    slots = {}
    for row in rows:
        host = row.domain_host or row.host
        if row.vm_id is not None and host.leaf:
            slots[row.vm_id] = (host.block, host.leaf)
    return slots


def best_spares(cluster: VirtualCluster, member: VirtualMachine | None = None) -> list:
    """The cluster's spares a 교체 of ``member`` may take now, best first: under the same
    leaf as the member, then last judged 정상 before never judged, then the longest kept.
    One whose last 검증 said 불량, 격리, held or no longer a fit is left out."""
    kept = [vm for vm in spares_of(cluster) if services.fit_refusal(vm, cluster) is None]
    kept = [vm for vm in kept if spare_refusal(vm) is None and holding_replace(vm) is None]
    verdicts = vm_verdicts(vm.pk for vm in kept)
    kept = [vm for vm in kept if getattr(verdicts.get(vm.pk), "verdict", None) != Verdict.BAD]
    slots = _slot([vm.pk for vm in kept] + ([member.pk] if member is not None else []))
    home = slots.get(member.pk) if member is not None else None

    def rank(position_vm: tuple[int, VirtualMachine]) -> tuple:
        position, vm = position_vm
        verdict = getattr(verdicts.get(vm.pk), "verdict", None)
        same_leaf = home is not None and slots.get(vm.pk) == home
        return (not same_leaf, verdict != Verdict.OK, position)

    return [vm for _position, vm in sorted(enumerate(kept), key=rank)]
