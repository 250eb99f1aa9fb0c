"""취소 of an Operation while it runs (docs/rules.md#cancelling): a 교체 until its spare has
joined, a 클러스터 검증 until its verdicts. A cancel leaves the cluster as it was, never
half-swapped:

- a 교체 asked to stop is marked so (``evidence["cancelled"]``); its walk, at its next step
  and never inside the swap, starts again the member it stopped and ends failed with
  ``operation_cancelled`` — at once when the member is not on its way somewhere;
- a 검증 ends at once: its open jobs are skipped, no verdict is recorded, and the members it
  put 점검 중 go back to what they were.

Who may start the kind may cancel it: VM UPDATE for a 교체, CLUSTER UPDATE for a 검증; an
automatic one (the system's, under a 교체 정책) the same.
"""

from django.db import transaction
from django.utils import timezone

from clusters.locking import lock_vms
from clusters.models import Operation, OperationItem
from clusters.models.validation import ValidationJob, ValidationRun
from clusters.operations.internal import ItemStatus, cluster_attempt, finish_operation
from clusters.operations.replace import advance_replace
from clusters.validation.jobs import OPEN
from portal.foundation.errors import NotCancellable, OperationCancelled, RuleViolation
from portal.foundation.kernel import Actor, check_perm, permission_refusal, raise_if
from portal.iam.permissions import Perm
from portal.models import readable
from vms import health
from vms.models import VmHealth

PERMISSION: dict[str, str] = {
    Operation.Kind.REPLACE: Perm.VM_UPDATE,
    Operation.Kind.VALIDATE: Perm.CLUSTER_UPDATE,
}


def cancel_refusal(operation: Operation) -> RuleViolation | None:
    """Only an open 교체 whose spare has not joined, or an open 검증."""
    if operation.kind not in PERMISSION or operation.finished_at is not None:
        return NotCancellable()
    if operation.kind == Operation.Kind.REPLACE:
        member = operation.items.filter(position=0).first()
        if member is None or member.status != ItemStatus.PENDING:
            return NotCancellable()
    return None


def preflight_cancel(actor: Actor, operation: Operation) -> RuleViolation | None:
    """What the progress card says beside 취소 (None: offered)."""
    permission = PERMISSION.get(operation.kind, Perm.CLUSTER_UPDATE)
    return permission_refusal(actor, permission, operation.cluster) or cancel_refusal(operation)


def cancel_operation(operation_id: object, *, actor: Actor) -> Operation:
    """Cancel ``operation_id`` (the actor reads its cluster, else not found; then the kind's
    permission, then ``cancel_refusal`` on the locked row)."""
    visible = readable(actor, Perm.CLUSTER_READ, Operation).filter(cluster__isnull=False)
    found = visible.get_or_404(operation_id)
    with cluster_attempt("operation.cancel", actor, found.cluster_id) as att:
        operation = Operation.objects.select_for_update().get(pk=found.pk)
        att.about(operation.cluster)
        att.message = f"{operation.get_kind_display()} #{operation.pk}"
        check_perm(actor, PERMISSION.get(operation.kind, Perm.CLUSTER_UPDATE), operation.cluster)
        raise_if(cancel_refusal(operation))
        if operation.kind == Operation.Kind.REPLACE:
            operation.evidence = {**operation.evidence, "cancelled": True}
            operation.save(update_fields=["evidence"])
            transaction.on_commit(lambda: advance_replace(operation.pk))
        else:
            _end_run(operation)
    return operation


def _end_run(operation: Operation) -> None:
    """A 검증 ended unjudged: its open jobs skipped, its items failed with the cancel, its
    members back from 점검 중."""
    now = timezone.now()
    run = ValidationRun.objects.select_for_update().get(pk=operation.pk)
    run.jobs.filter(status__in=OPEN).update(status=ValidationJob.Status.SKIPPED, finished_at=now)
    run.finished_at = now
    run.save(update_fields=["finished_at"])
    cancelled = OperationCancelled()
    items = list(operation.items.filter(status=ItemStatus.PENDING))
    for item in items:
        item.status, item.finished_at = OperationItem.Status.FAILED, now
        item.set_error(cancelled)
    OperationItem.objects.bulk_update(
        items, ["status", "finished_at", "error_code", "error_params"]
    )
    members = [item.vm_id for item in operation.items.all() if item.vm_id is not None]
    for vm in lock_vms(*members):
        health.restore(vm, VmHealth.CHECKING, actor=operation.actor)
    finish_operation(operation, cancelled)
