"""An operation item's end, decided once from its VM: the item of a start or a stop that a
worker took (``started_at``) is 성공 when its VM settles at the goal, 실패 with the VM's own
error (or the transition's) when it settles anywhere else.

The VM's own step (``vms.progress.advance_vm``) settles its items the moment the VM settles,
so a card counts each member as it finishes ("진행 2/4"), however long the watcher
(``clusters.operations.fanout.watch``) waits behind the members' steps in the queue; the
watcher settles what that missed (a VM moved by the reconciler) and finishes the operation.
An item is settled by one conditional write (``status=대기``): whichever comes first wins,
the other changes nothing.
"""

from django.utils import timezone

from clusters.models import Operation, OperationItem
from portal.foundation.errors import InvalidTransition
from vms.models import VM_TRANSITIONAL, VirtualMachine, VmStatus

# The VM status at which each fanned-out kind's item succeeded.
ITEM_GOALS: dict[str, str] = {
    Operation.Kind.START_MEMBERS: VmStatus.RUNNING,
    Operation.Kind.START_VM: VmStatus.RUNNING,
    Operation.Kind.STOP_MEMBERS: VmStatus.STOPPED,
    Operation.Kind.STOP_VM: VmStatus.STOPPED,
    Operation.Kind.STOP_CLUSTER: VmStatus.STOPPED,
}

Status = OperationItem.Status


def settle_item(item: OperationItem, vm: VirtualMachine | None, goal: str) -> bool:
    """Settle a started item from ``vm`` as it is now; False (nothing written) while the VM
    is on its way, or when the item was settled meanwhile."""
    if vm is not None and vm.status in VM_TRANSITIONAL:
        return False
    now = timezone.now()
    if vm is not None and vm.status == goal:
        status, error = Status.SUCCEEDED, None
    else:
        status = Status.FAILED
        error = (vm.last_error if vm is not None else None) or InvalidTransition()
    item.status, item.finished_at = status, now
    item.set_error(error)
    written = OperationItem.objects.filter(pk=item.pk, status=Status.PENDING).update(
        status=status, finished_at=now, error_code=item.error_code, error_params=item.error_params
    )
    return bool(written)


def settle_vm_items(vm_id: int) -> int:
    """Settle the started items of open operations waiting for VM ``vm_id``, now that it has
    settled; how many were settled."""
    vm = VirtualMachine.objects.filter(pk=vm_id).first()
    if vm is None or vm.status in VM_TRANSITIONAL:
        return 0
    waiting = OperationItem.objects.filter(
        vm_id=vm_id,
        status=Status.PENDING,
        started_at__isnull=False,
        operation__finished_at__isnull=True,
        operation__kind__in=list(ITEM_GOALS),
    ).select_related("operation")
    return sum(settle_item(item, vm, ITEM_GOALS[item.operation.kind]) for item in waiting)
