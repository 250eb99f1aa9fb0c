"""A VM's 시작중/중지중, finished through the backend by a task, and their repair."""

import logging

from django.db import transaction
from django.utils import timezone

from clusters.items import settle_vm_items
from clusters.locking import apply_fabric, lock_vm_with_cluster, save_vm
from portal.compute.backends import get_backend
from portal.foundation.audit import Attempt, record
from portal.foundation.errors import BackendError, CapacityUnavailable, RuleViolation
from portal.foundation.kernel import check_perm, set_status
from portal.iam.permissions import Perm
from portal.models import AuditEvent
from vms import health
from vms.models import VM_LIFECYCLE, VM_TRANSITIONAL, VirtualMachine, VmStatus

log = logging.getLogger(__name__)


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
        if expected == VmStatus.STARTING:
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
            failed = VmStatus.ERROR if expected == VmStatus.STOPPING else VmStatus.STOPPED
            set_status(locked, failed, VM_LIFECYCLE)
            locked.set_error(error)
            outcome = AuditEvent.Outcome.FAILED
        elif expected == VmStatus.STARTING:
            set_status(locked, VmStatus.RUNNING, VM_LIFECYCLE)
            if address is not None:
                apply_fabric(locked, address)
            outcome = AuditEvent.Outcome.SUCCEEDED
        else:
            set_status(locked, VmStatus.STOPPED, VM_LIFECYCLE)
            outcome = AuditEvent.Outcome.SUCCEEDED
        save_vm(locked)
        att = Attempt(
            action="vm.running" if expected == VmStatus.STARTING else "vm.stopped",
            actor=None,
            target_type="vm",
        )
        att.about(locked)
        record(att, outcome, error)
    # The operations waiting for it count it at once (not when their watcher next looks).
    settle_vm_items(vm_id)


def delete_resources(vm_id) -> None:
    vm = VirtualMachine.objects.filter(pk=vm_id, status=VmStatus.DELETED).first()
    if vm is not None:
        get_backend().delete_vm(vm)


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


def repair_drift() -> list[int]:
    """Make the portal say what the backend sees: a VM the portal thinks 실행중 whose guest
    shut down from inside, crashed or lost its domain becomes 중지됨, with an event naming
    why; a deleted VM whose domain is still there is deleted again; a domain no VM owns is
    reported (logged and audited once), never destroyed. Returns the VMs it changed."""
    backend = get_backend()
    began = timezone.now()
    try:
        seen = backend.observe()
    except BackendError:
        return []
    down = {pk: o.reason for pk, o in seen.vms.items() if not o.running}
    changed = []
    for vm_id in VirtualMachine.objects.filter(status=VmStatus.RUNNING, pk__in=down).values_list(
        "pk", flat=True
    ):
        if _mark_stopped(vm_id, down[vm_id], began):
            changed.append(vm_id)
    for vm in VirtualMachine.objects.filter(status=VmStatus.DELETED, pk__in=seen.vms):
        backend.delete_vm(vm)  # a delete whose cleanup failed: done again
    for name in seen.strays:
        _report_stray(name)
    return changed


def domain_stopped(vm_id, reason, seen_at) -> bool:
    """A guest that stopped on its own, as libvirt announced it (a lifecycle event, seen at
    ``seen_at``): the VM becomes 중지됨 now, with the event naming why, as the reconciler's
    next pass would make it. A stop the portal asked for finds the VM no longer 실행중."""
    return _mark_stopped(vm_id, reason, seen_at)


def _mark_stopped(vm_id, reason, observed_since) -> bool:
    """A VM that became 실행중 after the observation began is left to the next pass: its
    domain may have started after the backend looked."""
    with transaction.atomic():
        try:
            _cluster, vm = lock_vm_with_cluster(vm_id, None, Perm.VM_UPDATE)
        except RuleViolation:  # deleted or moved meanwhile: the next pass sees it
            return False
        if vm.status != VmStatus.RUNNING or vm.status_changed_at >= observed_since:
            return False
        # Not a transition of the lifecycle: the record catches up with what happened.
        vm.status, vm.status_changed_at = VmStatus.STOPPED, timezone.now()
        save_vm(vm)
        health.guest_died(vm, reason)
        att = Attempt(action="vm.stopped", actor=None, target_type="vm")
        att.about(vm)
        att.notice(reason or "domain_stopped")
        record(att, AuditEvent.Outcome.SUCCEEDED)
    get_backend().stop_vm(vm)  # gives back what a stopped VM does not hold
    return True


def _report_stray(name) -> None:
    if AuditEvent.objects.filter(action="vm.stray_domain", target_name=name).exists():
        return
    log.warning("domain %s belongs to no VM of this portal: left alone", name)
    att = Attempt(action="vm.stray_domain", actor=None, target_type="vm", target_name=name)
    att.notice("stray_domain", name=name)
    record(att, AuditEvent.Outcome.FAILED)
