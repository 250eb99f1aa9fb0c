"""A VM's 시작중/중지중, finished through the backend by a task, and their repair."""

from django.db import transaction

from clusters.backends import get_backend
from clusters.locking import apply_fabric, lock_vm_with_cluster, save_vm
from portal.audit import Attempt, record
from portal.errors import BackendError, CapacityUnavailable
from portal.kernel import check_perm, set_status
from portal.models import AuditEvent
from portal.permissions import Perm
from vms.models import VM_LIFECYCLE, VM_TRANSITIONAL, VirtualMachine, VmStatus

V = VmStatus


def advance_vm(vm_id) -> None:
    """Finish a VM's 시작중/중지중 through the backend. Idempotent."""
    vm = VirtualMachine.objects.filter(pk=vm_id).select_related("cluster").first()
    if vm is None or vm.status not in VM_TRANSITIONAL:
        return
    backend = get_backend()
    expected = vm.status
    address = None
    error = None
    try:
        if expected == V.STARTING:
            address = backend.start_vm(vm, vm.cluster)
        else:
            backend.stop_vm(vm)
    except (CapacityUnavailable, BackendError) as exc:
        error = exc
    with transaction.atomic():
        _cluster, locked = lock_vm_with_cluster(vm_id, None, Perm.VM_UPDATE)
        if locked.status != expected:
            return
        if error is not None:
            failed = V.ERROR if expected == V.STOPPING else V.STOPPED
            set_status(locked, failed, VM_LIFECYCLE)
            locked.set_error(error)
            outcome = AuditEvent.Outcome.FAILED
        elif expected == V.STARTING:
            set_status(locked, V.RUNNING, VM_LIFECYCLE)
            if address is not None:
                apply_fabric(locked, address)
            outcome = AuditEvent.Outcome.SUCCEEDED
        else:
            set_status(locked, V.STOPPED, VM_LIFECYCLE)
            outcome = AuditEvent.Outcome.SUCCEEDED
        save_vm(locked)
        att = Attempt(
            action="vm.running" if expected == V.STARTING else "vm.stopped",
            actor=None,
            target_type="vm",
        )
        att.about(locked)
        record(att, outcome, error)


def repair_vm(vm_id, *, actor=None) -> bool:
    """Finish a VM's transition now (admins' force-reconcile); a stable VM is left alone."""
    vm = VirtualMachine.objects.filter(pk=vm_id).first()
    if vm is None or vm.status not in VM_TRANSITIONAL:
        return False
    if actor is not None:
        check_perm(actor, Perm.VM_UPDATE, vm)
    advance_vm(vm_id)
    return True


def reconcile_vms(cutoff) -> list[int]:
    """VMs stuck in 시작중/중지중 since before ``cutoff``: finish the step through the backend."""
    stuck = list(
        VirtualMachine.objects.filter(
            status__in=VM_TRANSITIONAL, status_changed_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    for vm_id in stuck:
        advance_vm(vm_id)
    return stuck
