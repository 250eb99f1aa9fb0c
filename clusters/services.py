"""Every change to a cluster's status or membership (SPEC §4, §5). Nothing else writes them.

Each public function runs in one transaction, locks rows in a fixed order (cluster before
VM, members by id) so two transitions never deadlock, checks the actor's permission and the
rules, raises a typed error with the SPEC §5 message, audits the attempt and queues the slow
part with ``transaction.on_commit``. ``actor=None`` means the system (tasks, reconciler).
"""

import logging
import re
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from clusters.backends import get_backend
from clusters.models import (
    ALLOWED,
    DELETABLE,
    MEMBERSHIP_OPEN,
    STARTABLE,
    STOPPABLE,
    TRANSITIONAL,
    ClusterStatus,
    Operation,
    VirtualCluster,
)
from portal.audit import Attempt, attempt, record
from portal.broker import publish
from portal.errors import (
    AlreadyMember,
    BackendError,
    CapacityUnavailable,
    ClusterChanging,
    FabricNotOffered,
    InvalidInput,
    InvalidTransition,
    MembersStillRunning,
    NameTaken,
    NotEnoughMembers,
    NotFound,
    NotMember,
    PermissionRequired,
    RuleViolation,
    SpotOrDrVm,
    VmNotEligible,
    VmNotStopped,
)
from portal.models import AuditEvent
from portal.permissions import Perm
from vms.models import (
    VM_ACTIVE,
    BillingType,
    FabricOffering,
    FabricType,
    InstanceType,
    VirtualMachine,
    VmStatus,
    Zone,
)

log = logging.getLogger(__name__)
S = ClusterStatus
MIN_MEMBERS = 2
NAME_MAX = 63
NAME_RE = re.compile(r"^[0-9A-Za-z가-힣-]+$")
HOLDS_RESOURCES = frozenset({S.PROVISIONING, S.ALLOCATED, S.WAITING, S.RUNNING})


# ---------------------------------------------------------------------------------------------
# Helpers shared by the services of both apps


def validate_name(raw):
    """Trim and check a resource name: 1-63 letters, digits, hyphens or Korean."""
    name = (raw or "").strip()
    if not name:
        raise InvalidInput(_("이름을 입력하세요."), field="name")
    if len(name) > NAME_MAX:
        raise InvalidInput(
            _("이름은 %(max)d자 이하로 입력하세요.") % {"max": NAME_MAX}, field="name"
        )
    if not NAME_RE.match(name):
        raise InvalidInput(
            _("이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다."), field="name"
        )
    return name


def to_id(value):
    """An id from a form or URL; anything that is not a positive integer is not found."""
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise NotFound() from None
    if number <= 0 or number > 2**62:
        raise NotFound()
    return number


def source_text(message):
    """A message as stored (``last_error``): in the source language, translated on display."""
    with translation.override(settings.LANGUAGE_CODE):
        return str(message)


def check_perm(actor, permission, obj):
    if actor is not None and not actor.has_perm(permission, obj):
        raise PermissionRequired(permission)


def set_status(obj, new_status, allowed=ALLOWED):
    """Move ``obj`` to ``new_status`` if the transition table allows it (a bug otherwise)."""
    if new_status not in allowed[obj.status]:
        raise InvalidTransition()
    obj.status = new_status
    obj.status_changed_at = timezone.now()


def lock_cluster(cluster_id, actor, permission, att=None):
    """The cluster row, locked; NotFound unless the actor may read it, then ``permission``."""
    cluster = VirtualCluster.objects.select_for_update().filter(pk=to_id(cluster_id)).first()
    if cluster is None or (actor is not None and not actor.has_perm(Perm.CLUSTER_READ, cluster)):
        raise NotFound(_("클러스터를 찾을 수 없습니다."))
    if att is not None:
        att.about(cluster)
    check_perm(actor, permission, cluster)
    return cluster


def lock_members(cluster):
    return list(VirtualMachine.objects.select_for_update().filter(cluster=cluster).order_by("pk"))


def lock_vm(vm_id, actor, permission, att=None):
    vm = VirtualMachine.objects.select_for_update().filter(pk=to_id(vm_id)).first()
    if vm is None or vm.status == VmStatus.DELETED:
        raise NotFound(_("가상머신을 찾을 수 없습니다."))
    if actor is not None and not actor.has_perm(Perm.VM_READ, vm):
        raise NotFound(_("가상머신을 찾을 수 없습니다."))
    if att is not None:
        att.about(vm)
    check_perm(actor, permission, vm)
    return vm


def lock_vm_with_cluster(vm_id, actor, permission, att=None):
    """Lock a VM and, first, the cluster it belongs to (fixed order: cluster before VM).

    If the membership changed between the peek and the lock, refuse rather than lock
    another cluster while holding the VM: that would invert the order and deadlock.
    """
    peek = VirtualMachine.objects.filter(pk=to_id(vm_id)).values_list("cluster_id").first()
    cluster_id = peek[0] if peek else None
    cluster = None
    if cluster_id is not None:
        cluster = VirtualCluster.objects.select_for_update().get(pk=cluster_id)
    vm = lock_vm(vm_id, actor, permission, att)
    if vm.cluster_id != cluster_id:
        raise ClusterChanging()
    return cluster, vm


def clear_fabric(vm):
    vm.fabric_guid = ""
    vm.fabric_lid = None
    vm.fabric_ip = None
    vm.fabric_gid_index = None


def apply_fabric(vm, address):
    vm.fabric_guid = address.guid
    vm.fabric_lid = address.lid
    vm.fabric_ip = address.ip
    vm.fabric_gid_index = address.gid_index


def save_vm(vm):
    vm.save(
        update_fields=[
            "status",
            "status_changed_at",
            "cluster",
            "fabric_guid",
            "fabric_lid",
            "fabric_ip",
            "fabric_gid_index",
            "last_error",
        ]
    )


def save_cluster(cluster):
    cluster.save(
        update_fields=[
            "status",
            "status_changed_at",
            "operation",
            "previous_status",
            "generation",
            "last_error",
        ]
    )


def queue_after_commit(task, *args):
    """Send ``task`` once the transaction commits.

    The change is made whatever the broker says: if it cannot take the message (down,
    restarting), the step is left to the reconciler (SPEC §4) instead of turning a change
    that happened into a 500. Only broker-side errors are caught (``portal.broker.publish``).
    """

    def send():
        publish(task, *args)

    transaction.on_commit(send)


def _queue_advance(cluster):
    from clusters.tasks import advance_cluster

    queue_after_commit(advance_cluster, cluster.pk, cluster.generation)


def _queue_release(cluster):
    from clusters.tasks import release_cluster

    queue_after_commit(release_cluster, cluster.pk)


# ---------------------------------------------------------------------------------------------
# User actions


def offered_fabrics(zone_id, instance_type_id):
    return list(
        FabricOffering.objects.filter(zone_id=zone_id, instance_type_id=instance_type_id)
        .order_by("fabric")
        .values_list("fabric", flat=True)
        .distinct()
    )


def create_cluster(*, actor, project, name, zone_id, instance_type_id, fabric_type):
    """Create an empty cluster in 준비중; a task moves it to 미할당.

    Rules: CREATE permission in ``project``; a valid name unique among the project's
    non-deleted clusters; the instance type offers ``fabric_type`` in the zone (SPEC §5.7).
    """
    with attempt("cluster.create", actor=actor, target_type="cluster") as att:
        att.project_id = project.pk
        att.target_name = str(name or "")[:100]
        check_perm(actor, Perm.CLUSTER_CREATE, project)
        name = validate_name(name)
        att.target_name = name
        zone = Zone.objects.filter(pk=_maybe_id(zone_id)).first()
        if zone is None:
            raise InvalidInput(_("가용 영역을 선택하세요."), field="zone")
        instance_type = InstanceType.objects.filter(pk=_maybe_id(instance_type_id)).first()
        if instance_type is None:
            raise InvalidInput(_("인스턴스 유형을 선택하세요."), field="instance_type")
        if fabric_type not in FabricType.values:
            raise InvalidInput(_("패브릭 타입을 선택하세요."), field="fabric_type")
        if fabric_type not in offered_fabrics(zone.pk, instance_type.pk):
            raise FabricNotOffered()
        if VirtualCluster.objects.alive().filter(project=project, name=name).exists():
            raise NameTaken()
        cluster = VirtualCluster(
            project=project,
            name=name,
            zone=zone,
            instance_type=instance_type,
            fabric_type=fabric_type,
            status=S.PROVISIONING,
            operation=Operation.CREATE,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        try:
            with transaction.atomic():
                cluster.save()
        except IntegrityError:
            # A concurrent create took the name between our check and our insert.
            raise NameTaken() from None
        att.about(cluster)
        _queue_advance(cluster)
    return cluster


def _maybe_id(value):
    try:
        return to_id(value)
    except NotFound:
        return None


def start_cluster(cluster_id, *, actor):
    """미할당/종료됨 → 준비중 (→ 할당됨 → 대기중 → 실행중 by tasks). Needs 2+ members."""
    with attempt("cluster.start", actor=actor, target_type="cluster") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_UPDATE, att)
        if cluster.status not in STARTABLE:
            raise InvalidTransition()
        members = lock_members(cluster)
        if len(members) < MIN_MEMBERS:
            raise NotEnoughMembers()
        cluster.previous_status = cluster.status
        set_status(cluster, S.PROVISIONING)
        cluster.operation = Operation.START
        cluster.generation += 1
        cluster.last_error = ""
        save_cluster(cluster)
        _queue_advance(cluster)
    return cluster


def stop_cluster(cluster_id, *, actor):
    """실행중/할당됨/대기중 → 종료됨, releasing the fabric. Refused while a member runs."""
    with attempt("cluster.stop", actor=actor, target_type="cluster") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_UPDATE, att)
        if cluster.status not in STOPPABLE:
            raise InvalidTransition()
        members = lock_members(cluster)
        if any(vm.status in VM_ACTIVE for vm in members):
            raise MembersStillRunning()
        for vm in members:
            clear_fabric(vm)
            save_vm(vm)
        set_status(cluster, S.TERMINATED)
        cluster.operation = Operation.NONE
        save_cluster(cluster)
        _queue_release(cluster)
    return cluster


def delete_cluster(cluster_id, *, actor):
    """미할당/종료됨 → 삭제됨; members are detached and stay as ordinary VMs."""
    with attempt("cluster.delete", actor=actor, target_type="cluster") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_DELETE, att)
        if cluster.status not in DELETABLE:
            raise InvalidTransition()
        members = lock_members(cluster)
        if any(vm.status in VM_ACTIVE for vm in members):
            raise MembersStillRunning()
        for vm in members:
            vm.cluster = None
            clear_fabric(vm)
            save_vm(vm)
        set_status(cluster, S.DELETED)
        cluster.operation = Operation.NONE
        save_cluster(cluster)
        att.message = _("멤버 %(count)d대를 분리했습니다.") % {"count": len(members)}
        _queue_release(cluster)
    return cluster


def attach_vm(vm_id, cluster_id, *, actor):
    """Make a stopped on-demand/reserved VM of the cluster's zone and type a member.

    Rules (SPEC §5.1-3): VM UPDATE and cluster READ; same project; the cluster is 미할당,
    실행중 or 종료됨; the VM is in no cluster, not spot or DR, stopped, same zone and type.
    """
    with attempt("vm.attach", actor=actor, target_type="vm") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_READ)
        vm = lock_vm(vm_id, actor, Perm.VM_UPDATE, att)
        if vm.project_id != cluster.project_id or cluster.status == S.DELETED:
            raise NotFound(_("클러스터를 찾을 수 없습니다."))
        att.message = cluster.name
        att.cluster_id = cluster.pk
        if vm.cluster_id is not None:
            raise AlreadyMember()
        if cluster.status not in MEMBERSHIP_OPEN:
            raise ClusterChanging()
        if vm.billing_type == BillingType.SPOT or vm.disaster_recovery:
            raise SpotOrDrVm()
        if (
            vm.status != VmStatus.STOPPED
            or vm.zone_id != cluster.zone_id
            or vm.instance_type_id != cluster.instance_type_id
        ):
            raise VmNotEligible()
        if cluster.status == S.RUNNING:
            # A running cluster's fabric grows with it: reserve the node (or refuse) now.
            get_backend().allocate(cluster, len(lock_members(cluster)) + 1)
        vm.cluster = cluster
        save_vm(vm)
    return vm


def detach_vm(vm_id, *, actor):
    """Take a stopped VM out of its cluster; a running cluster keeps at least 2 members."""
    with attempt("vm.detach", actor=actor, target_type="vm") as att:
        cluster, vm = lock_vm_with_cluster(vm_id, actor, Perm.VM_UPDATE, att)
        if cluster is None:
            raise NotMember()
        att.message = cluster.name
        att.cluster_id = cluster.pk
        if cluster.status not in MEMBERSHIP_OPEN:
            raise ClusterChanging()
        if vm.status != VmStatus.STOPPED:
            raise VmNotStopped()
        if cluster.status == S.RUNNING:
            remaining = VirtualMachine.objects.filter(cluster=cluster).exclude(pk=vm.pk).count()
            if remaining < MIN_MEMBERS:
                raise NotEnoughMembers()
        vm.cluster = None
        clear_fabric(vm)
        save_vm(vm)
    return vm


# ---------------------------------------------------------------------------------------------
# The asynchronous walk of SPEC §4, one step per call (tasks and the reconciler call these)


def advance_cluster(cluster_id, generation=None):
    """Do the next step of a transitional cluster; return True while more steps remain.

    Idempotent: acts only from the status it expects, and a task of an older generation
    (a start that was since stopped and started again) stands down.
    """
    cluster = VirtualCluster.objects.filter(pk=cluster_id).first()
    if cluster is None or cluster.status not in TRANSITIONAL:
        return False
    if generation is not None and generation != cluster.generation:
        return False
    backend = get_backend()
    expected = cluster.status

    if expected == S.PROVISIONING and cluster.operation == Operation.CREATE:
        try:
            backend.register_cluster(cluster)
        except BackendError as exc:
            _roll_back_start(cluster.pk, cluster.generation, exc.message)
            return False
        return _finish_step(cluster, expected, S.UNALLOCATED, "cluster.provisioned")

    if expected == S.PROVISIONING:
        nodes = VirtualMachine.objects.filter(cluster=cluster).count()
        try:
            backend.allocate(cluster, nodes)
        except (CapacityUnavailable, BackendError) as exc:
            _roll_back_start(cluster.pk, cluster.generation, exc.message)
            return False
        return _finish_step(cluster, expected, S.ALLOCATED, "cluster.allocated")

    if expected == S.ALLOCATED:
        # Allocation done; the fabric is configured next (대기중).
        return _finish_step(cluster, expected, S.WAITING, "cluster.waiting")

    # WAITING: configure the fabric for the members, then RUNNING.
    members = list(VirtualMachine.objects.filter(cluster=cluster).order_by("pk"))
    try:
        addresses = backend.configure_fabric(cluster, members)
    except (CapacityUnavailable, BackendError) as exc:
        _roll_back_start(cluster.pk, cluster.generation, exc.message)
        return False
    return _finish_step(cluster, expected, S.RUNNING, "cluster.running", addresses)


def _finish_step(cluster, expected, new_status, action, addresses=None):
    with transaction.atomic():
        locked = VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
        if locked.status != expected or locked.generation != cluster.generation:
            # Someone (a stop, the reconciler, a duplicate task) moved it meanwhile.
            _release_if_idle(locked)
            return False
        members = lock_members(locked)
        if addresses is not None:
            for vm in members:
                if vm.pk in addresses:
                    apply_fabric(vm, addresses[vm.pk])
                    save_vm(vm)
        set_status(locked, new_status)
        if new_status not in TRANSITIONAL:
            locked.operation = Operation.NONE
            locked.previous_status = ""
        save_cluster(locked)
        _record_system(locked, action, AuditEvent.Outcome.SUCCEEDED)
        more = new_status in TRANSITIONAL
        if more:
            _queue_advance(locked)
    return more


def _record_system(cluster, action, outcome, message=""):
    att = Attempt(action=action, actor=None, target_type="cluster")
    att.about(cluster)
    return record(att, outcome, message)


def _roll_back_start(cluster_id, generation, message):
    """A start that cannot finish goes back to its previous stable status; nothing stays held."""
    with transaction.atomic():
        cluster = VirtualCluster.objects.select_for_update().get(pk=cluster_id)
        if cluster.generation != generation or cluster.status not in TRANSITIONAL:
            return
        members = lock_members(cluster)
        for vm in members:
            clear_fabric(vm)
            save_vm(vm)
        fallback = cluster.previous_status or S.UNALLOCATED
        if cluster.operation == Operation.CREATE:
            fallback = S.UNALLOCATED
        set_status(cluster, fallback)
        cluster.operation = Operation.NONE
        cluster.previous_status = ""
        cluster.last_error = source_text(message)
        save_cluster(cluster)
        _record_system(cluster, "cluster.start", AuditEvent.Outcome.FAILED, message)
        _queue_release(cluster)


def _release_if_idle(cluster):
    """Give back the fabric of a cluster that no longer wants it (caller holds the lock)."""
    if cluster.status not in HOLDS_RESOURCES:
        get_backend().release(cluster)


def release_cluster(cluster_id):
    with transaction.atomic():
        cluster = VirtualCluster.objects.select_for_update().filter(pk=cluster_id).first()
        if cluster is not None:
            _release_if_idle(cluster)


def reconcile(now=None):
    """Repair clusters stuck in a transitional status past the timeout (a dead worker, a
    lost task): finish the step if the backend can, else roll back. Returns what it touched."""
    from vms.services import reconcile_vms

    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.TRANSITION_TIMEOUT_SECONDS)
    stuck = VirtualCluster.objects.filter(status__in=TRANSITIONAL, status_changed_at__lt=cutoff)
    repaired = [cluster_id for cluster_id in stuck.values_list("pk", flat=True)]
    for cluster_id in repaired:
        repair_cluster(cluster_id)
    # A release whose task never reached the broker (queue_after_commit) is done here.
    idle = VirtualCluster.objects.filter(pk__in=get_backend().allocated_cluster_ids()).exclude(
        status__in=HOLDS_RESOURCES
    )
    for cluster_id in idle.values_list("pk", flat=True):
        release_cluster(cluster_id)
    return repaired + reconcile_vms(cutoff)


def repair_cluster(cluster_id, *, actor=None):
    """Drive one transitional cluster to a stable status now: finish what the backend can,
    roll back the rest. The reconciler calls it for stuck clusters; admins may force it."""
    cluster = VirtualCluster.objects.filter(pk=cluster_id).first()
    if cluster is None or cluster.status not in TRANSITIONAL:
        return False
    if actor is not None:
        check_perm(actor, Perm.CLUSTER_UPDATE, cluster)
    generation = cluster.generation
    att = Attempt(action="cluster.reconcile", actor=actor, target_type="cluster")
    att.about(cluster)
    record(att, AuditEvent.Outcome.SUCCEEDED, _("시간 초과된 전환을 복구합니다."))
    try:
        for _step in range(5):
            if not advance_cluster(cluster_id, generation):
                break
    except RuleViolation as exc:
        _roll_back_start(cluster_id, generation, exc.message)
    if VirtualCluster.objects.get(pk=cluster_id).status in TRANSITIONAL:
        _roll_back_start(cluster_id, generation, _("전환이 시간 내에 끝나지 않아 되돌렸습니다."))
    return True
