"""virtual-machines: list, read, create (one or many), rename, delete, start, stop.
Reads go through ``restrict()``; every change is a ``clusters.operations`` call."""

from django.db.models import Case, F, When
from ninja import Query, Router

from clusters import operations as ops
from portal.api import pagination
from portal.api.common import ListFilters, actor, filtered, path_id, project, visible
from portal.api.inputs import QueryInt, RenameIn, VmCreateIn
from portal.api.operations import change
from portal.api.schemas import OperationOut, VmDetailOut, VmPage, read
from portal.foundation.errors import VmNotFound
from portal.foundation.kernel import parse_id
from portal.iam.permissions import Perm
from portal.models import readable
from vms.models import VirtualMachine, VmStatus

router = Router(tags=["virtual-machines"])
ORDERS = pagination.orders("name", "created_at")


class VmFilters(ListFilters):
    order_by: str = "name"


class VmListFilters(VmFilters):
    cluster: QueryInt | None = None


# The columns of a VM that VmOut shows or its properties read (``schemas.VmRow``), no more.
COLUMNS = (
    *("id", "project_id", "name", "zone_id", "instance_type_id", "status", "error_code"),
    *("billing_type", "disaster_recovery", "cluster_id", "private_ip", "created_at"),
    *("fabric_guid", "fabric_lid", "fabric_ip", "fabric_gid_index"),
    *("health", "health_changed_at", "health_code", "health_params"),
)
ROW = {
    "zone_code": F("zone__code"),
    "type_code": F("instance_type__code"),
    # An error's params only with an error: most rows have none, and JSON to decode less.
    "stored_params": Case(When(error_code="", then=None), default=F("error_params")),
}


def with_codes(vms):
    """``vms`` as ``VmOut`` reads them: ``values()`` rows (no model instances to build) of
    the columns it reads, with their zone's and type's codes (one join each)."""
    return vms.values(*COLUMNS, **ROW)


def readable_vms(user):
    """The VMs ``user`` may read, deleted ones included (a list shows them when asked)."""
    return with_codes(VirtualMachine.objects.restrict(user, Perm.VM_READ))


def readable_vm(request, vm_id: int) -> dict:
    """One VM's row for its detail: ``with_codes``'s, its agent's version and its keys."""
    vms = readable(actor(request), Perm.VM_READ, VirtualMachine)
    row = {**ROW, "agent_version": F("metrics_token__agent_version")}
    found = vms.values(*COLUMNS, **row).get_or_404(vm_id)
    chosen = VirtualMachine.ssh_keys.through.objects.filter(virtualmachine_id=found["id"])
    found["ssh_key_ids"] = sorted(chosen.values_list("sshkey_id", flat=True))
    return found


def vm_page(request, vms, filters) -> VmPage:
    """One page of ``vms`` after the console's filters (삭제됨 only when asked for)."""
    vms = filtered(vms, filters, VmStatus.values)
    return read(VmPage, pagination.page(vms, ORDERS, filters), **visible(request))


@router.get("/virtual-machines", response=VmPage, summary="가상머신 목록")
def list_vms(request, filters: Query[VmListFilters]):
    vms = readable_vms(actor(request))
    if filters.cluster is not None:
        # An id no row can have lists nothing (filtering on None would list the VMs of no
        # cluster).
        cluster_id = parse_id(filters.cluster)
        vms = vms.filter(cluster_id=cluster_id) if cluster_id else vms.none()
    return vm_page(request, vms, filters)


@router.get("/virtual-machines/{int:vm_id}", response=VmDetailOut, summary="가상머신")
def get_vm(request, vm_id: int):
    return read(VmDetailOut, readable_vm(request, vm_id), **visible(request))


# ---------------------------------------------------------------------------------------------
# Changes

ACCEPTED = {202: OperationOut}


@router.post("/virtual-machines", response=ACCEPTED, summary="가상머신 생성")
def create_vms(request, payload: VmCreateIn):
    """``count`` stopped VMs (``<name>-01`` … when more than one), all or none, each attached
    to ``cluster_id`` if given: an Operation with an item per VM. With ``cluster_id`` the
    attach rule is asked first: VMs it would refuse (spot/DR, another zone or instance type)
    are refused whole with its code, and none is created."""
    return change(request, ops.create_vms, project=project(request), **payload.dict())


@router.patch("/virtual-machines/{int:vm_id}", response=VmDetailOut, summary="가상머신 이름 변경")
def rename_vm(request, vm_id: int, payload: RenameIn):
    ops.rename_vm_op(path_id(vm_id, VmNotFound), actor=actor(request), name=payload.name)
    return get_vm(request, vm_id)


@router.delete("/virtual-machines/{int:vm_id}", response=ACCEPTED, summary="가상머신 삭제")
def delete_vm(request, vm_id: int):
    return change(request, ops.delete_vm_op, path_id(vm_id, VmNotFound))


@router.post("/virtual-machines/{int:vm_id}:start", response=ACCEPTED, summary="가상머신 시작")
def start_vm(request, vm_id: int):
    """Done when the VM is 실행중 (a member starts only while its cluster is 실행중)."""
    return change(request, ops.start_vm_op, path_id(vm_id, VmNotFound))


@router.post("/virtual-machines/{int:vm_id}:stop", response=ACCEPTED, summary="가상머신 중지")
def stop_vm(request, vm_id: int):
    return change(request, ops.stop_vm_op, path_id(vm_id, VmNotFound))
