"""virtual-machines: list, read, create (one or many), rename, delete, start, stop.
Reads go through ``restrict()``; every change is a ``clusters.operations`` call."""

from ninja import Query, Router

from clusters import operations as ops
from portal.api import pagination
from portal.api.common import ListFilters, actor, error_json, filtered, labels, path_id, project
from portal.api.operations import accepted
from portal.api.schemas import OperationOut, QueryInt, RenameIn, VmCreateIn, VmOut, VmPage
from portal.errors import VmNotFound
from portal.kernel import parse_id
from portal.models import readable
from portal.permissions import Perm
from vms.models import VirtualMachine, VmStatus

router = Router(tags=["virtual-machines"])
ORDERS = pagination.orders("name", "created_at")


class VmFilters(ListFilters):
    order_by: str = "name"


class VmListFilters(VmFilters):
    cluster: QueryInt | None = None


def readable_vms(user):
    """The VMs ``user`` may read, deleted ones included (a list shows them when asked)."""
    return VirtualMachine.objects.restrict(user, Perm.VM_READ).select_related(
        "zone", "instance_type"
    )


def readable_vm(request, vm_id: int) -> VirtualMachine:
    vms = readable(actor(request), Perm.VM_READ, VirtualMachine)
    return vms.select_related("zone", "instance_type").get_or_404(vm_id)


def vm_json(vm: VirtualMachine, *, cluster_visible: bool, status_labels: dict[str, str]) -> dict:
    return {
        "id": vm.pk,
        "project_id": vm.project_id,
        "name": vm.name,
        "zone_id": vm.zone_id,
        "zone": vm.zone.code,
        "instance_type_id": vm.instance_type_id,
        "instance_type": vm.instance_type.code,
        "billing_type": vm.billing_type,
        "disaster_recovery": vm.disaster_recovery,
        "status": vm.status,
        "status_label": status_labels[vm.status],
        # Which cluster a VM is in is the cluster's to tell (as on the console's VM list).
        "cluster_id": vm.cluster_id if cluster_visible else None,
        "private_ip": vm.private_ip,
        "fabric_address": vm.fabric_address,
        "last_error": error_json(vm.last_error),
        "created_at": vm.created_at,
    }


def vm_page(request, vms, filters) -> dict:
    """One page of ``vms`` after the console's filters (삭제됨 only when asked for)."""
    vms = filtered(vms, filters, VmStatus.values)
    rows, next_token = pagination.page(vms, ORDERS, filters)
    # A token sees one project: one answer for every row.
    visible = actor(request).has_perm(Perm.CLUSTER_READ, project(request))
    status_labels = labels(VmStatus)
    return {
        "items": [vm_json(vm, cluster_visible=visible, status_labels=status_labels) for vm in rows],
        "next_page_token": next_token,
    }


@router.get("/virtual-machines", response=VmPage, summary="가상머신 목록")
def list_vms(request, filters: Query[VmListFilters]):
    vms = readable_vms(actor(request))
    if filters.cluster is not None:
        # An id no row can have lists nothing (filtering on None would list the VMs of no
        # cluster).
        cluster_id = parse_id(filters.cluster)
        vms = vms.filter(cluster_id=cluster_id) if cluster_id else vms.none()
    return vm_page(request, vms, filters)


@router.get("/virtual-machines/{int:vm_id}", response=VmOut, summary="가상머신")
def get_vm(request, vm_id: int):
    vm = readable_vm(request, vm_id)
    visible = actor(request).has_perm(Perm.CLUSTER_READ, vm)
    return vm_json(vm, cluster_visible=visible, status_labels=labels(VmStatus))


# ---------------------------------------------------------------------------------------------
# Changes

ACCEPTED = {202: OperationOut}


@router.post("/virtual-machines", response=ACCEPTED, summary="가상머신 생성")
def create_vms(request, payload: VmCreateIn):
    """``count`` stopped VMs (``<name>-01`` … when more than one), all or none, each attached
    to ``cluster_id`` if given: an Operation with an item per VM. With ``cluster_id`` the
    attach rule is asked first: VMs it would refuse (spot/DR, another zone or instance type)
    are refused whole with its code, and none is created."""
    return accepted(
        request,
        lambda claim: ops.create_vms(
            actor=actor(request),
            project=project(request),
            idempotency=claim,
            **payload.dict(),
        ),
    )


@router.patch("/virtual-machines/{int:vm_id}", response=VmOut, summary="가상머신 이름 변경")
def rename_vm(request, vm_id: int, payload: RenameIn):
    ops.rename_vm_op(path_id(vm_id, VmNotFound), actor=actor(request), name=payload.name)
    return get_vm(request, vm_id)


def _vm_change(request, vm_id: int, operation):
    vid = path_id(vm_id, VmNotFound)
    return accepted(request, lambda claim: operation(vid, actor=actor(request), idempotency=claim))


@router.delete("/virtual-machines/{int:vm_id}", response=ACCEPTED, summary="가상머신 삭제")
def delete_vm(request, vm_id: int):
    return _vm_change(request, vm_id, ops.delete_vm_op)


@router.post("/virtual-machines/{int:vm_id}:start", response=ACCEPTED, summary="가상머신 시작")
def start_vm(request, vm_id: int):
    """Done when the VM is 실행중 (a member starts only while its cluster is 실행중)."""
    return _vm_change(request, vm_id, ops.start_vm_op)


@router.post("/virtual-machines/{int:vm_id}:stop", response=ACCEPTED, summary="가상머신 중지")
def stop_vm(request, vm_id: int):
    return _vm_change(request, vm_id, ops.stop_vm_op)
