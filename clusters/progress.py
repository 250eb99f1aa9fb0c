"""A cluster's asynchronous walk (docs/rules.md#cluster-lifecycle), one step per call, and its
repair.

준비중 → 미할당 (create), 준비중 → 할당됨 → 대기중 → 실행중 (start), or back to the previous
stable status when a step cannot finish. Tasks (``clusters.tasks``) call ``advance_cluster``
and queue the next step; the reconciler calls ``repair_cluster`` for what a dead worker or a
lost message left behind. Nothing here is a user action: those are ``clusters.services``.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.events import move_cluster
from clusters.locking import apply_fabric, clear_fabric, lock_members, save_cluster, save_vm
from clusters.models import (
    HOLDS_RESOURCES,
    TRANSITIONAL,
    ClusterOp,
    ClusterStatus,
    VirtualCluster,
)
from portal.compute.backends import get_backend
from portal.foundation.audit import Attempt, record
from portal.foundation.errors import (
    BackendError,
    CapacityUnavailable,
    RuleViolation,
    TransitionTimedOut,
)
from portal.foundation.kernel import check_perm
from portal.iam.permissions import Perm
from portal.models import AuditEvent
from vms.models import VirtualMachine
from vms.progress import reconcile_vms, repair_drift

log = logging.getLogger(__name__)


def advance_cluster(cluster_id, generation=None) -> bool:
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
    addresses = None
    try:
        if expected == ClusterStatus.PROVISIONING and cluster.operation == ClusterOp.CREATE:
            backend.register_cluster(cluster)
            new_status, action = ClusterStatus.UNALLOCATED, "cluster.provisioned"
        elif expected == ClusterStatus.PROVISIONING:
            backend.allocate(cluster, VirtualMachine.objects.filter(cluster=cluster).count())
            new_status, action = ClusterStatus.ALLOCATED, "cluster.allocated"
        elif expected == ClusterStatus.ALLOCATED:
            # Allocation done; the fabric is configured next (대기중).
            new_status, action = ClusterStatus.WAITING, "cluster.waiting"
        else:
            # WAITING: configure the fabric for the members, then RUNNING.
            members = list(VirtualMachine.objects.filter(cluster=cluster).order_by("pk"))
            addresses = backend.configure_fabric(cluster, members)
            new_status, action = ClusterStatus.RUNNING, "cluster.running"
    except (CapacityUnavailable, BackendError) as exc:
        roll_back_start(cluster.pk, cluster.generation, exc)
        return False
    return _finish_step(cluster, expected, new_status, action, addresses)


def _finish_step(cluster, expected, new_status, action, addresses) -> bool:
    with transaction.atomic():
        locked = VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
        if locked.status != expected or locked.generation != cluster.generation:
            # Someone (a stop, the reconciler, a duplicate task) moved it meanwhile.
            _release_if_idle(locked)
            return False
        if addresses is not None:
            for vm in lock_members(locked):
                if vm.pk in addresses:
                    apply_fabric(vm, addresses[vm.pk])
                    save_vm(vm)
        set_status_step(locked, new_status)
        save_cluster(locked)
        _record_system(locked, action, AuditEvent.Outcome.SUCCEEDED)
    return new_status in TRANSITIONAL


def set_status_step(cluster, new_status) -> None:
    move_cluster(cluster, new_status, error_code=cluster.error_code)
    if new_status not in TRANSITIONAL:
        cluster.operation = ClusterOp.NONE
        cluster.previous_status = ""


def _record_system(cluster, action, outcome, error=None):
    att = Attempt(action=action, actor=None, target_type="cluster")
    att.about(cluster)
    return record(att, outcome, error)


def roll_back_start(cluster_id, generation, error: RuleViolation, *, unless_moved_since=None):
    """A start that cannot finish goes back to its previous stable status; nothing stays
    held. With ``unless_moved_since``, a cluster whose status changed after that moment is
    left alone: another process is advancing it."""
    with transaction.atomic():
        cluster = VirtualCluster.objects.select_for_update().get(pk=cluster_id)
        if cluster.generation != generation or cluster.status not in TRANSITIONAL:
            return
        if unless_moved_since is not None and cluster.status_changed_at >= unless_moved_since:
            return
        for vm in lock_members(cluster):
            clear_fabric(vm)
            save_vm(vm)
        fallback = cluster.previous_status or ClusterStatus.UNALLOCATED
        if cluster.operation == ClusterOp.CREATE:
            fallback = ClusterStatus.UNALLOCATED
        cluster.set_error(error)  # first: the status change tells why
        set_status_step(cluster, fallback)
        save_cluster(cluster)
        _record_system(cluster, "cluster.start", AuditEvent.Outcome.FAILED, error)
        transaction.on_commit(lambda: release_cluster(cluster_id))


def _release_if_idle(cluster) -> None:
    """Give back the fabric of a cluster that no longer wants it (caller holds the lock)."""
    if cluster.status not in HOLDS_RESOURCES:
        get_backend().release(cluster)


def release_cluster(cluster_id) -> None:
    with transaction.atomic():
        cluster = VirtualCluster.objects.select_for_update().filter(pk=cluster_id).first()
        if cluster is not None:
            _release_if_idle(cluster)


def reconcile(now=None) -> list[int]:
    """Repair clusters and VMs stuck in a transitional status past the timeout (a dead
    worker, a lost task), release fabric that idle clusters still hold (a fabric network the
    backend finds for a cluster that holds none is such fabric), and make running VMs match
    what the backend observes. Returns the ids of what it repaired."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.TRANSITION_TIMEOUT_SECONDS)
    stuck = VirtualCluster.objects.filter(status__in=TRANSITIONAL, status_changed_at__lt=cutoff)
    repaired = list(stuck.values_list("pk", flat=True))
    for cluster_id in repaired:
        repair_cluster(cluster_id)
    # A release whose task never reached the broker (queue_after_commit) is done here.
    idle = VirtualCluster.objects.filter(pk__in=get_backend().allocated_cluster_ids()).exclude(
        status__in=HOLDS_RESOURCES
    )
    for cluster_id in idle.values_list("pk", flat=True):
        release_cluster(cluster_id)
    return repaired + reconcile_vms(cutoff) + repair_drift()


def repair_cluster(cluster_id, *, actor=None) -> bool:
    """Drive one transitional cluster to a stable status now: finish what the backend can,
    roll back the rest. The reconciler calls it for stuck clusters; admins may force it.

    A cluster that another process moved while this ran is left to that process: rolling
    it back would undo a healthy start (a restarted worker and the reconciler together).
    """
    cluster = VirtualCluster.objects.filter(pk=cluster_id).first()
    if cluster is None or cluster.status not in TRANSITIONAL:
        return False
    if actor is not None:
        check_perm(actor, Perm.CLUSTER_UPDATE, cluster)
    generation = cluster.generation
    began = timezone.now()
    att = Attempt(action="cluster.reconcile", actor=actor, target_type="cluster")
    att.about(cluster)
    att.notice("reconcile_started")
    record(att, AuditEvent.Outcome.SUCCEEDED)
    try:
        for _step in range(len(TRANSITIONAL) + 1):
            if not advance_cluster(cluster_id, generation):
                break
    except RuleViolation as exc:
        roll_back_start(cluster_id, generation, exc)
    roll_back_start(cluster_id, generation, TransitionTimedOut(), unless_moved_since=began)
    return True
