"""How an Operation's progress and result are put in words, once, for its progress card, its
toast, the cluster header and the 활동 tab: a failure is never styled or worded as success.

While it runs: 진행 2/4 (and 실패 1 as soon as one failed), and what it is doing now
(``doing``: the members on their way, the cluster's step; never "0/0" for an operation without
items). Done: 성공 4/4 only when every
item succeeded; 성공 3 · 실패 1 when some did; 실패 1 when none did; 실패 and the reason when
the whole operation failed. A 클러스터 검증 is judged by its verdicts (정상 / 점검 필요 /
불량 / 응답 없음), the words of its own section, never "실패" for a member judged 불량.
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from clusters.models import (
    TRANSITIONAL,
    ClusterStatus,
    Operation,
    OperationItem,
    ReplacePolicy,
    VirtualCluster,
)
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
    """Items in all, finished (succeeded or failed), failed and started (on their way), as
    one aggregate."""
    done = (OperationItem.Status.SUCCEEDED, OperationItem.Status.FAILED)
    pk = f"{prefix}pk"
    pending = OperationItem.Status.PENDING
    return {
        "n_total": Count(pk),
        "n_finished": Count(pk, filter=Q(**{f"{prefix}status__in": done})),
        "n_failed": Count(pk, filter=Q(**{f"{prefix}status": OperationItem.Status.FAILED})),
        # taken by a worker, waiting for its VM to settle
        "n_started": Count(
            pk,
            filter=Q(**{f"{prefix}status": pending, f"{prefix}started_at__isnull": False}),
        ),
    }


def describe(
    operation: Operation, n_total: int, n_finished: int, n_failed: int, n_started: int = 0
) -> Outcome:
    """The words and the state of ``operation`` with these item counts."""
    if not operation.done:
        if not n_total:  # a cluster's own step, a 검증: no items to count
            return Outcome(RUNNING, _("진행 중"))
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
        if operation.kind == Operation.Kind.REPLACE:
            return Outcome(SUCCEEDED, replaced_text(operation))
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
# The user's actions whose outcome the cluster header shows once they end, until the user
# dismisses it or acts on the cluster again: those answered in the header itself (a bulk
# action's outcome is its card's, a 검증's its section's).
HEADER_KINDS = (Operation.Kind.START_CLUSTER,)


def with_open_operation(clusters: QuerySet) -> QuerySet:
    """``clusters`` annotated with ``open_operation_id``, the newest operation still running
    on each (or None): ``open_operation`` of a cluster read so asks nothing when it is idle,
    as most clusters most of the time are (every cluster page and header poll asks); and
    with ``failed_header_operation_id``, the newest operation when it is one the header
    answers that failed (``header_outcome`` asks nothing when there is none)."""
    running = Operation.objects.filter(cluster=OuterRef("pk"), finished_at__isnull=True)
    newest = running.order_by("-created_at", "-id").values("pk")[:1]
    last = Operation.objects.filter(cluster=OuterRef("pk")).order_by("-created_at", "-id")
    failed = (
        Operation.objects.filter(
            pk=OuterRef("last_operation_id"), kind__in=HEADER_KINDS, finished_at__isnull=False
        )
        .exclude(error_code="")
        .values("pk")[:1]
    )
    return clusters.annotate(
        open_operation_id=Subquery(newest), last_operation_id=Subquery(last.values("pk")[:1])
    ).annotate(failed_header_operation_id=Subquery(failed))


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


def replaced_text(operation: Operation) -> str:
    """A 교체 that succeeded, in its own words: which member left and which spare took its
    place (its two items), never a bare "성공 2/2"."""
    names = list(operation.items.order_by("position").values_list("target_name", flat=True))
    if len(names) != 2:
        return _("완료")
    return _("교체 완료: %(member)s → %(spare)s") % {"member": names[0], "spare": names[1]}


NAMES_SHOWN = 2
# What a cluster start is doing at each of its statuses (docs/rules.md#cluster-lifecycle):
# the step's number of three and its words.
START_STEPS: dict[str, tuple[int, Any]] = {
    ClusterStatus.PROVISIONING: (1, gettext_lazy("자원 할당 중")),
    ClusterStatus.ALLOCATED: (2, gettext_lazy("패브릭 구성 준비 중")),
    ClusterStatus.WAITING: (3, gettext_lazy("패브릭 구성 중")),
}


def _names(names: list[str], total: int) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    if total > NAMES_SHOWN:
        shown += " " + _("외 %(n)d대") % {"n": total - NAMES_SHOWN}
    return shown


def _items_doing(operation: Operation, counts: dict | None) -> str:
    if counts is None:
        keys = ("n_total", "n_finished", "n_started")
        counts = {key: getattr(operation, key, None) for key in keys}
    if None in counts.values():  # not read with the operation (``item_counts``)
        counts = operation.items.aggregate(**item_counts())
    parts = []
    if counts["n_started"]:
        on_way = list(
            operation.items.filter(status=OperationItem.Status.PENDING, started_at__isnull=False)
            .order_by("position")
            .values_list("target_name", "position")[:NAMES_SHOWN]
        )
        # A 교체's spare (its second item) starts; its member stops.
        replacing = operation.kind == Operation.Kind.REPLACE and on_way[0][1] == 1
        starting = replacing or operation.kind in (
            Operation.Kind.START_MEMBERS,
            Operation.Kind.START_VM,
        )
        words = _("%(names)s 시작 중") if starting else _("%(names)s 중지 중")
        names = [name for name, _position in on_way]
        parts.append(words % {"names": _names(names, counts["n_started"])})
    queued = counts["n_total"] - counts["n_finished"] - counts["n_started"]
    if queued > 0 and operation.kind != Operation.Kind.REPLACE:
        parts.append(_("대기 %(n)d대") % {"n": queued})
    if not parts and operation.kind == Operation.Kind.STOP_CLUSTER:
        parts.append(_("클러스터 중지 중"))
    return " · ".join(parts)


def doing(
    operation: Operation, counts: dict | None = None, cluster: VirtualCluster | None = None
) -> str:
    """What a running ``operation`` is doing now, in a few words for its card and the
    cluster header: the members on their way ("gpu-node-03, gpu-node-04 시작 중 · 대기
    2대"), a cluster start's step ("자원 할당 중 (1/3단계)"), a 검증's checks; "" when done.
    ``counts``: its ``item_counts``, if read already (else those annotated on it, or one
    query); ``cluster``: its cluster, if read already."""
    if operation.done:
        return ""
    if operation.kind == Operation.Kind.VALIDATE:
        jobs = operation.validation.jobs if hasattr(operation, "validation") else None
        if jobs is None:
            return ""
        done = jobs.exclude(status__in=("PENDING", "RUNNING")).count()
        return _("검사 %(n)d/%(m)d") % {"n": done, "m": jobs.count()}
    if operation.kind in (Operation.Kind.START_CLUSTER, Operation.Kind.CREATE_CLUSTER):
        if cluster is None:
            cluster = VirtualCluster.objects.filter(pk=operation.cluster_id or 0).first()
        status = cluster.status if cluster is not None else ""
        if operation.kind == Operation.Kind.CREATE_CLUSTER:
            return str(_("클러스터 준비 중")) if status == ClusterStatus.PROVISIONING else ""
        step = START_STEPS.get(status)
        if step is None:
            return ""
        return _("%(step)s (%(n)d/%(m)d단계)") % {"step": step[1], "n": step[0], "m": 3}
    return _items_doing(operation, counts)


def header_outcome(cluster: VirtualCluster, user, dismissed=()) -> Operation | None:
    """The cluster's last operation when it is the user's, one the header answers, and
    ended in failure (a start rolled back for want of capacity, say), and was not dismissed
    (``dismissed``: operation ids): shown in the header on every tab, with its reason.
    Acting again (anyone: the cluster has changed since) makes a newer operation, which
    hides it."""
    failed_id = getattr(cluster, "failed_header_operation_id", _NOT_READ)
    if failed_id is None or not getattr(user, "pk", None) or failed_id in dismissed:
        return None  # read with the cluster (``with_open_operation``): nothing failed last
    last = Operation.objects.filter(cluster=cluster).order_by("-created_at", "-id").first()
    if last is None or last.actor_id != user.pk or last.pk in dismissed:
        return None
    if last.kind not in HEADER_KINDS or not last.done or last.last_error is None:
        return None
    return last


@dataclass(frozen=True)
class Final:
    """How a request the 활동 tab lists ended: its state (the label's colour), the label and
    what happened, in words."""

    state: str
    label: str
    text: str


def _ends_start(event) -> bool:
    """Whether audit ``event`` ends a cluster start in flight: 실행중, the worker's (or the
    reconciler's) roll back, or a stop or delete that went through."""
    if event.action == "cluster.running":
        return True
    if event.action == "cluster.start":
        return event.actor_id is None and event.outcome == "FAILED"
    return event.action in ("cluster.stop", "cluster.delete") and event.outcome == "SUCCEEDED"


def start_finals(events: list, cluster: VirtualCluster) -> dict[int, Final]:
    """For each user's 클러스터 시작 among ``events`` (the 활동 tab's, newest first), how it
    finally ended, by event id: an accepted start is followed by exactly one end (실행중,
    rolled back with its reason, or stopped), since none can begin while another is in
    flight. So an accepted start is never shown as 성공 before it is 실행중."""
    finals: dict[int, Final] = {}
    end = None  # the nearest end newer than the events walked so far
    for event in events:
        if event.action == "cluster.start" and event.actor_id is not None:
            if event.outcome == "SUCCEEDED":
                finals[event.pk] = _final(end, cluster)
            end = None if event.outcome == "SUCCEEDED" else end
        elif _ends_start(event):
            end = event
    return finals


def _final(end, cluster: VirtualCluster) -> Final:
    requested = _("클러스터 시작을 요청했습니다.")
    if end is None:
        if cluster.status in TRANSITIONAL:
            return Final(RUNNING, _("진행 중"), requested)
        return Final("queued", _("요청됨"), requested)
    if end.action == "cluster.running":
        return Final(SUCCEEDED, _("성공"), _("실행중이 되었습니다."))
    if end.action == "cluster.start":
        return Final(FAILED, _("실패"), _("시작하지 못했습니다: %(reason)s") % {"reason": end.text})
    return Final("stopped", _("중지됨"), _("실행중이 되기 전에 중지했습니다."))


def acted_under(operation: Operation) -> str:
    """An automatic operation's line (``clusters.operations.heal``): the 교체 정책 it acted
    under, who set it and when, and the evidence that started it; "" for a user's own."""
    evidence = operation.evidence or {}
    if evidence.get("policy") not in ReplacePolicy.values:
        return ""
    why = render_message(str(evidence.get("code") or ""), evidence.get("params") or {})
    params = {
        "policy": ReplacePolicy(evidence["policy"]).label,
        "who": evidence.get("set_by") or "-",
        "at": str(evidence.get("set_at") or "-")[:16].replace("T", " "),
        "member": evidence.get("member", ""),
        "why": why,
    }
    return render_message("policy_acted", params)
