"""Row locks in the one fixed order (cluster before VM; VMs by id, the members and any VM
taken with them) and the writes that follow them. Every service of ``clusters`` and ``vms``
takes its locks here, so two transitions can never wait on each other in opposite orders. A
backend's capacity comes last: the simulator's pool row, or the libvirt backend's GPU host
rows of the zone (by id, ``portal.compute.backends.libvirt.placement.lock_hosts``).
"""

from typing import TYPE_CHECKING

from django.db.models import Q

from clusters.models import VirtualCluster
from portal.foundation.errors import ClusterChanging, VmNotFound
from portal.foundation.kernel import Actor, check_perm, id_for_lookup, require_id
from portal.iam.permissions import Perm
from portal.models import readable
from vms.models import VirtualMachine

if TYPE_CHECKING:
    from portal.compute.backends.base import FabricAddress
    from portal.foundation.audit import Attempt

VM_STATE_FIELDS = [
    "status",
    "status_changed_at",
    "cluster",
    "fabric_guid",
    "fabric_lid",
    "fabric_ip",
    "fabric_gid_index",
    "error_code",
    "error_params",
]
CLUSTER_STATE_FIELDS = [
    "status",
    "status_changed_at",
    "operation",
    "previous_status",
    "generation",
    "error_code",
    "error_params",
]


def lock_cluster(
    cluster_id: object, actor: Actor, permission: str, att: "Attempt | None" = None
) -> VirtualCluster:
    """The cluster row, locked; ClusterNotFound unless the actor may read it, then
    ``PermissionRequired`` unless the actor holds ``permission`` on it."""
    rows = readable(actor, Perm.CLUSTER_READ, VirtualCluster).select_for_update()
    cluster = rows.get_or_404(cluster_id)
    if att is not None:
        att.about(cluster)
    check_perm(actor, permission, cluster)
    return cluster


def lock_members(cluster: VirtualCluster, *joining: object) -> list[VirtualMachine]:
    """The cluster's members, locked by id; with them, in the same id order, ``joining``
    (the ids of VMs about to join it: a 교체's spare), which are locked but not returned."""
    ids = [id_for_lookup(vm_id) for vm_id in joining]
    rows = VirtualMachine.objects.select_for_update().filter(Q(cluster=cluster) | Q(pk__in=ids))
    return [vm for vm in rows.order_by("pk") if vm.cluster_id == cluster.pk]


def lock_vms(*vm_ids: object) -> list[VirtualMachine]:
    """The VMs ``vm_ids`` (those that exist), locked by id: a transaction that takes two VMs
    takes them in the order every other one does, never one and then a lower one."""
    ids = [id_for_lookup(vm_id) for vm_id in vm_ids]
    return list(VirtualMachine.objects.select_for_update().filter(pk__in=ids).order_by("pk"))


def lock_vm(
    vm_id: object, actor: Actor, permission: str, att: "Attempt | None" = None
) -> VirtualMachine:
    vm = readable(actor, Perm.VM_READ, VirtualMachine).select_for_update().get_or_404(vm_id)
    if att is not None:
        att.about(vm)
    check_perm(actor, permission, vm)
    return vm


def lock_vm_with_cluster(
    vm_id: object, actor: Actor, permission: str, att: "Attempt | None" = None
) -> tuple[VirtualCluster | None, VirtualMachine]:
    """Lock a VM and, first, the cluster it belongs to (fixed order: cluster before VM).

    If the membership changed between the peek and the lock, refuse rather than lock
    another cluster while holding the VM: that would invert the order and deadlock.
    Returns ``(cluster or None, vm)``.
    """
    peek = (
        VirtualMachine.objects.filter(pk=require_id(vm_id, VmNotFound))
        .values_list("cluster_id")
        .first()
    )
    cluster_id = peek[0] if peek else None
    cluster = None
    if cluster_id is not None:
        cluster = VirtualCluster.objects.select_for_update().get(pk=cluster_id)
    vm = lock_vm(vm_id, actor, permission, att)
    if vm.cluster_id != cluster_id:
        raise ClusterChanging()
    return cluster, vm


def clear_fabric(vm: VirtualMachine) -> None:
    vm.fabric_guid = ""
    vm.fabric_lid = None
    vm.fabric_ip = None
    vm.fabric_gid_index = None


def apply_fabric(vm: VirtualMachine, address: "FabricAddress") -> None:
    vm.fabric_guid = address.guid
    vm.fabric_lid = address.lid
    vm.fabric_ip = address.ip
    vm.fabric_gid_index = address.gid_index


def save_vm(vm: VirtualMachine) -> None:
    vm.save(update_fields=VM_STATE_FIELDS)


def save_cluster(cluster: VirtualCluster) -> None:
    cluster.save(update_fields=CLUSTER_STATE_FIELDS)
