"""How an Operation's progress and result are put in words, once, for its progress card, its
toast, the cluster header and the 활동 tab: a failure is never styled or worded as success.

While it runs: 진행 2/4 (and 실패 1 as soon as one failed). Done: 성공 4/4 only when every
item succeeded; 성공 3 · 실패 1 when some did; 실패 1 when none did; 실패 and the reason when
the whole operation failed. A 클러스터 검증 is judged by its verdicts (정상 / 점검 필요 /
불량 / 응답 없음), the words of its own section, never "실패" for a member judged 불량.
"""

from dataclasses import dataclass

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.utils.translation import gettext as _

from clusters.models import Operation, OperationItem, VirtualCluster
from clusters.models.validation import ValidationVerdict, Verdict
from portal.foundation.event_text import render_message

RUNNING, SUCCEEDED, PARTIAL, FAILED = "running", "succeeded", "partial", "failed"


@dataclass(frozen=True)
class Outcome:
    state: str  # running / succeeded / partial / failed: the card's colour and the 활동 label
    text: str

    @property
    def failed(self) -> bool:
        return self.state in (PARTIAL, FAILED)


def item_counts(prefix: str = "") -> dict:
    """Items in all, finished (succeeded or failed) and failed, as one aggregate."""
    done = (OperationItem.Status.SUCCEEDED, OperationItem.Status.FAILED)
    pk = f"{prefix}pk"
    return {
        "n_total": Count(pk),
        "n_finished": Count(pk, filter=Q(**{f"{prefix}status__in": done})),
        "n_failed": Count(pk, filter=Q(**{f"{prefix}status": OperationItem.Status.FAILED})),
    }


def describe(operation: Operation, n_total: int, n_finished: int, n_failed: int) -> Outcome:
    """The words and the state of ``operation`` with these item counts."""
    if not operation.done:
        text = _("진행 %(n)d/%(m)d") % {"n": n_finished, "m": n_total}
        if n_failed:
            text += " · " + _("실패 %(n)d") % {"n": n_failed}
        return Outcome(RUNNING, text)
    if operation.last_error is not None:
        return Outcome(FAILED, _("실패"))
    if operation.kind == Operation.Kind.VALIDATE:
        return _validation_outcome(operation)
    succeeded = n_finished - n_failed
    if not n_failed:
        if not n_total:
            return Outcome(SUCCEEDED, _("완료"))
        return Outcome(SUCCEEDED, _("성공 %(n)d/%(m)d") % {"n": succeeded, "m": n_total})
    if succeeded:
        text = _("성공 %(ok)d · 실패 %(failed)d") % {"ok": succeeded, "failed": n_failed}
        return Outcome(PARTIAL, text)
    return Outcome(FAILED, _("실패 %(n)d") % {"n": n_failed})


def _validation_outcome(operation: Operation) -> Outcome:
    counts = dict(
        ValidationVerdict.objects.filter(run_id=operation.pk)
        .values_list("verdict")
        .annotate(n=Count("pk"))
        .values_list("verdict", "n")
    )
    params = {
        "ok": counts.get(Verdict.OK, 0),
        "warn": counts.get(Verdict.WARN, 0),
        "bad": counts.get(Verdict.BAD, 0),
        "silent": counts.get(Verdict.NO_ANSWER, 0),
    }
    state = FAILED if params["bad"] or params["silent"] else SUCCEEDED
    return Outcome(state, render_message("validation_done", params))


def of(operation: Operation) -> Outcome:
    """``describe`` with the counts annotated by ``item_counts`` (a list of operations)."""
    return describe(
        operation,
        getattr(operation, "n_total", 0),
        getattr(operation, "n_finished", 0),
        getattr(operation, "n_failed", 0),
    )


_NOT_READ = object()


def with_open_operation(clusters: QuerySet) -> QuerySet:
    """``clusters`` annotated with ``open_operation_id``, the newest operation still running
    on each (or None): ``open_operation`` of a cluster read so asks nothing when it is idle,
    as most clusters most of the time are (every cluster page and header poll asks)."""
    running = Operation.objects.filter(cluster=OuterRef("pk"), finished_at__isnull=True)
    newest = running.order_by("-created_at", "-id").values("pk")[:1]
    return clusters.annotate(open_operation_id=Subquery(newest))


def open_operation(cluster: VirtualCluster) -> Operation | None:
    """The newest operation still running on ``cluster`` (with its item counts), or None:
    what the header names while it runs, offering nothing that contradicts it."""
    if getattr(cluster, "open_operation_id", _NOT_READ) is None:
        return None  # read with the cluster (``with_open_operation``): none was running
    return (
        Operation.objects.filter(cluster=cluster, finished_at__isnull=True)
        .annotate(**item_counts("items__"))
        .order_by("-created_at", "-id")
        .first()
    )
