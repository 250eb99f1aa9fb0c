"""Every change to a VM's status (SPEC §5.6). Membership lives in ``clusters.services``.

Same discipline as there: one transaction, the VM's cluster locked before the VM, a typed
error with the user's message, an audit event, the slow part queued on commit.
"""

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from clusters.backends import get_backend
from clusters.models import ClusterStatus
from clusters.services import (
    apply_fabric,
    check_perm,
    lock_vm_with_cluster,
    queue_after_commit,
    save_vm,
    set_status,
    source_text,
    validate_name,
)
from portal.audit import Attempt, attempt, record
from portal.errors import (
    BackendError,
    CapacityUnavailable,
    ClusterNotRunning,
    InvalidInput,
    InvalidTransition,
    VmIsMember,
    VmNameTaken,
    VmNotStopped,
)
from portal.models import AuditEvent
from portal.permissions import Perm
from vms.models import (
    VM_TRANSITIONAL,
    BillingType,
    FabricOffering,
    InstanceType,
    VirtualMachine,
    VmStatus,
    Zone,
)

V = VmStatus
ALLOWED = {
    V.STOPPED: {V.STARTING, V.DELETED},
    V.STARTING: {V.RUNNING, V.STOPPED, V.ERROR},
    V.RUNNING: {V.STOPPING},
    V.STOPPING: {V.STOPPED, V.ERROR},
    # ERROR: the backend failed to stop it; stopping again is the way out.
    V.ERROR: {V.STOPPING},
    V.DELETED: set(),
}


def _queue_advance(vm):
    from vms.tasks import advance_vm

    queue_after_commit(advance_vm, vm.pk)


def create_vm(
    *, actor, project, name, zone_id, instance_type_id, billing_type, disaster_recovery=False
):
    """Create a stopped VM (중지됨) with a private IP from the backend."""
    with attempt("vm.create", actor=actor, target_type="vm") as att:
        att.project_id = project.pk
        att.target_name = str(name or "")[:100]
        check_perm(actor, Perm.VM_CREATE, project)
        name = validate_name(name)
        zone = Zone.objects.filter(pk=_int_or_none(zone_id)).first()
        if zone is None:
            raise InvalidInput(_("가용 영역을 선택하세요."), field="zone")
        instance_type = InstanceType.objects.filter(pk=_int_or_none(instance_type_id)).first()
        if (
            instance_type is None
            or not FabricOffering.objects.filter(zone=zone, instance_type=instance_type).exists()
        ):
            raise InvalidInput(
                _("이 가용 영역에서 제공하지 않는 인스턴스 유형입니다."), field="instance_type"
            )
        if billing_type not in BillingType.values:
            raise InvalidInput(_("과금 유형을 선택하세요."), field="billing_type")
        if VirtualMachine.objects.alive().filter(project=project, name=name).exists():
            raise VmNameTaken()
        vm = VirtualMachine(
            project=project,
            name=name,
            zone=zone,
            instance_type=instance_type,
            billing_type=billing_type,
            disaster_recovery=bool(disaster_recovery),
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        try:
            with transaction.atomic():
                vm.save()
        except IntegrityError:
            raise VmNameTaken() from None
        vm.private_ip = get_backend().create_vm(vm)
        vm.save(update_fields=["private_ip"])
        att.about(vm)
    return vm


def _int_or_none(value):
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if 0 < number < 2**62 else None


def rename_vm(vm_id, *, actor, name):
    with attempt("vm.update", actor=actor, target_type="vm") as att:
        _cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        name = validate_name(name)
        if name == vm.name:
            return vm
        if VirtualMachine.objects.alive().filter(project_id=vm.project_id, name=name).exists():
            raise VmNameTaken()
        att.message = f"{vm.name} → {name}"
        vm.name = name
        try:
            with transaction.atomic():
                vm.save(update_fields=["name"])
        except IntegrityError:  # a concurrent rename or create took the name
            raise VmNameTaken() from None
        att.target_name = name
    return vm


def start_vm(vm_id, *, actor):
    """중지됨 → 시작중 (→ 실행중 by a task). A member starts only in a running cluster."""
    with attempt("vm.start", actor=actor, target_type="vm") as att:
        cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        if vm.status != V.STOPPED:
            raise InvalidTransition()
        if cluster is not None and cluster.status != ClusterStatus.RUNNING:
            raise ClusterNotRunning()
        set_status(vm, V.STARTING, ALLOWED)
        vm.last_error = ""
        save_vm(vm)
        _queue_advance(vm)
    return vm


def stop_vm(vm_id, *, actor):
    """실행중/오류 → 중지중 (→ 중지됨 by a task)."""
    with attempt("vm.stop", actor=actor, target_type="vm") as att:
        _cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        if vm.status not in (V.RUNNING, V.ERROR):
            raise InvalidTransition()
        set_status(vm, V.STOPPING, ALLOWED)
        save_vm(vm)
        _queue_advance(vm)
    return vm


def delete_vm(vm_id, *, actor):
    with attempt("vm.delete", actor=actor, target_type="vm") as att:
        cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_DELETE, att)
        if cluster is not None:
            raise VmIsMember()
        if vm.status != V.STOPPED:
            raise VmNotStopped()
        set_status(vm, V.DELETED, ALLOWED)
        save_vm(vm)
    return vm


def advance_vm(vm_id):
    """Finish a VM's 시작중/중지중 through the backend. Idempotent; returns nothing."""
    vm = VirtualMachine.objects.filter(pk=vm_id).select_related("cluster").first()
    if vm is None or vm.status not in VM_TRANSITIONAL:
        return
    backend = get_backend()
    expected = vm.status
    address = None
    error = ""
    try:
        if expected == V.STARTING:
            address = backend.start_vm(vm, vm.cluster)
        else:
            backend.stop_vm(vm)
    except (CapacityUnavailable, BackendError) as exc:
        error = source_text(exc.message)
    with transaction.atomic():
        cluster, locked = lock_vm_with_cluster(vm_id, None, Perm.VM_UPDATE)
        if locked.status != expected:
            return
        if error:
            set_status(locked, V.ERROR if expected == V.STOPPING else V.STOPPED, ALLOWED)
            locked.last_error = error
            outcome = AuditEvent.Outcome.FAILED
        elif expected == V.STARTING:
            set_status(locked, V.RUNNING, ALLOWED)
            if address is not None:
                apply_fabric(locked, address)
            outcome = AuditEvent.Outcome.SUCCEEDED
        else:
            set_status(locked, V.STOPPED, ALLOWED)
            outcome = AuditEvent.Outcome.SUCCEEDED
        save_vm(locked)
        att = Attempt(
            action="vm.running" if expected == V.STARTING else "vm.stopped",
            actor=None,
            target_type="vm",
        )
        att.about(locked)
        record(att, outcome, locked.last_error)


def repair_vm(vm_id, *, actor=None):
    """Finish a VM's transition now (admins' force-reconcile); a stable VM is left alone."""
    vm = VirtualMachine.objects.filter(pk=vm_id).first()
    if vm is None or vm.status not in VM_TRANSITIONAL:
        return False
    if actor is not None:
        check_perm(actor, Perm.VM_UPDATE, vm)
    advance_vm(vm_id)
    return True


def reconcile_vms(cutoff):
    """VMs stuck in 시작중/중지중 since before ``cutoff``: finish the step through the backend."""
    stuck = list(
        VirtualMachine.objects.filter(
            status__in=VM_TRANSITIONAL, status_changed_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    for vm_id in stuck:
        advance_vm(vm_id)
    return stuck
