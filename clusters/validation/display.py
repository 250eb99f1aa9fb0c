"""What the pages show of 클러스터 검증: a member's latest verdict (the 연결된 가상머신
column, with 교체 offered on 불량), and a run's history rows and per-check figures, with the
cluster's baseline beside this run's figures where the run is judged by one."""

from django.db.models import OuterRef, QuerySet, Subquery
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _

from clusters.models import Operation
from clusters.models.validation import (
    ValidationBaseline,
    ValidationJob,
    ValidationRun,
    ValidationVerdict,
    Verdict,
)
from clusters.validation.baseline import pair_figure
from clusters.validation.verdict import reason_text
from vms.models import VM_TRANSITIONAL

BADGE: dict[str, str] = {
    Verdict.OK: "running",
    Verdict.WARN: "waiting",
    Verdict.BAD: "error",
    Verdict.NO_ANSWER: "terminated",
}


def latest_verdicts(cluster) -> dict[int, ValidationVerdict]:
    """The members' verdicts of the cluster's last finished run, for a cluster read
    ``with_last_validation`` (every cluster page's read): none, no query (most clusters are
    never validated); else one."""
    run_id = cluster.last_validation_id
    if run_id is None:
        return {}
    verdicts = ValidationVerdict.objects.filter(run_id=run_id)
    return {v.vm_id: v for v in verdicts if v.vm_id is not None}


def with_last_validation(clusters: QuerySet) -> QuerySet:
    """``clusters`` annotated with ``last_validation_id``, their last finished run (or
    None), as ``latest_verdicts`` reads it: one subquery in the cluster's own read."""
    last = ValidationRun.objects.filter(
        operation__cluster=OuterRef("pk"),
        operation__kind=Operation.Kind.VALIDATE,
        finished_at__isnull=False,
    ).order_by("-operation__created_at")
    return clusters.annotate(last_validation_id=Subquery(last.values("pk")[:1]))


def vm_verdicts(vm_ids) -> dict[int, ValidationVerdict]:
    """Each VM's last verdict in any finished run, of whichever cluster it was in then: a
    spare judged 불량 in its old cluster is still suspect."""
    verdicts: dict = {}
    rows = ValidationVerdict.objects.filter(
        vm_id__in=list(vm_ids), run__finished_at__isnull=False
    ).order_by("vm_id", "-run_id")
    for verdict in rows:
        verdicts.setdefault(verdict.vm_id, verdict)
    return verdicts


# Verdicts that make a VM a poor spare: marked in the 교체 list.
SUSPECT = (Verdict.BAD, Verdict.WARN)


def verdict_badge(verdict: ValidationVerdict | None):
    if verdict is None:
        return "-"
    reasons = "; ".join(reason_text(r) for r in verdict.reasons)
    return format_html(
        '<span class="badge badge-{}" data-verdict="{}" title="{}">{}</span>',
        BADGE[verdict.verdict],
        verdict.verdict,
        reasons,
        verdict.get_verdict_display(),
    )


def verdict_cell(verdict, vm, cluster, can_update: bool):
    """The 검증 cell of a member row: its verdict, and on 불량 the 교체 button (not while the
    member is on its way somewhere, e.g. stopping for a 교체 already under way)."""
    if verdict is None:
        return "-"
    badge = verdict_badge(verdict)
    url = replace_url(verdict, cluster, can_update and vm.status not in VM_TRANSITIONAL)
    if not url:
        return badge
    return format_html(
        '{} <a class="btn btn-small btn-danger" href="{}" aria-label="{} {}">{}</a>',
        badge,
        url,
        vm.name,
        _("교체"),
        _("교체"),
    )


def _bw_summary(figures):
    values = [
        bw["average_gbps"] for bw in (figures.get("bw") or {}).values() if "average_gbps" in bw
    ]
    if not values:
        return ""
    return _("포트 %(n)d개, %(low).3g–%(high).3g Gb/s") % {
        "n": len(values),
        "low": min(values),
        "high": max(values),
    }


def job_summary(job: ValidationJob) -> str:
    """The figures of one job in a few words (the table's 수치 column); figures of a shape
    these words do not fit (a stored row written by other code) read as none, never an
    error."""
    try:
        return _summary(job)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
        return ""


def _summary(job: ValidationJob) -> str:
    figures = job.figures or {}
    if figures.get("skipped"):
        return _("GPU 없음")
    if figures.get("error"):
        return str(figures["error"])[:200]
    if job.kind == ValidationJob.Kind.GPU:
        diag = figures.get("diag") or {}
        return _("GPU %(gpus)s개, 실패 %(failed)d건, 경고 %(warned)d건") % {
            "gpus": (figures.get("gpu_list") or {}).get("count", "?"),
            "failed": len(diag.get("failed", [])),
            "warned": len(diag.get("warned", [])),
        }
    if job.kind in (
        ValidationJob.Kind.NCCL_LOCAL,
        ValidationJob.Kind.NCCL_PAIR,
        ValidationJob.Kind.NCCL_ALL,
    ):
        nccl = figures.get("nccl") or {}
        if "busbw_gbs" in nccl:
            return _("busbw %(busbw).3g GB/s (%(size)d MiB)") % {
                "busbw": nccl["busbw_gbs"],
                "size": nccl["bytes"] // (1 << 20),
            }
        return ""
    return _bw_summary(figures)


def _now_and_then(now, then) -> dict:
    return {
        "now": now,
        "baseline": then,
        "percent": 100.0 * now / then if now is not None and then else None,
    }


def baseline_rows(run: ValidationRun, jobs: list[ValidationJob]) -> list[dict]:
    """For a run judged by the cluster's own baseline: each ring pair (client → server) and
    the all-reduce, the baseline's figure beside this run's ([] for a catalog-judged run)."""
    wanted = run.thresholds or {}
    if "generation" not in wanted:
        return []
    baseline = wanted.get("baseline")
    names = {job.vm_id: job.vm_name for job in jobs}
    rows = []
    for job in jobs:
        figures = job.figures or {}
        if job.kind == ValidationJob.Kind.IB_CLIENT and wanted.get("soft_fabric") and job.peers:
            bw: dict = next(iter((figures.get("bw") or {}).values()), {})
            server = job.peers[0]
            rows.append(
                {
                    "what": f"ib_write_bw {job.vm_name} → {names.get(server, '?')}",
                    "unit": "Gb/s",
                    **_now_and_then(
                        bw.get("average_gbps"), pair_figure(baseline, job.vm_id, server)
                    ),
                }
            )
        elif job.kind == ValidationJob.Kind.NCCL_ALL and job.params.get("runner") == "mpi":
            rows.append(
                {
                    "what": _("MPI all-reduce busbw (%(n)d노드)") % {"n": len(job.peers) + 1},
                    "unit": "GB/s",
                    **_now_and_then(
                        (figures.get("nccl") or {}).get("busbw_gbs"),
                        (baseline or {}).get("allreduce_busbw_gbs"),
                    ),
                }
            )
    return rows


def replace_url(verdict, cluster, can_update: bool) -> str:
    """Where 교체 of a member judged 불량 starts ('' if it is not offered)."""
    if verdict.verdict != Verdict.BAD or not can_update or verdict.vm_id is None:
        return ""
    return reverse("clusters:member_replace", args=[cluster.pk]) + f"?member={verdict.vm_id}"


def membership_since(verdicts, members: dict[int, str]) -> dict | None:
    """How the cluster's members (``members``: id → name) differ from those a finished run
    judged (its ``verdicts``): the names that left and joined since, or None if they are
    the same. A run of other members is older than the cluster as it is: its verdicts do
    not speak for a member that joined since."""
    judged = {v.vm_id: v.vm_name for v in verdicts}
    left = sorted(name for pk, name in judged.items() if pk not in members)
    joined = sorted(name for pk, name in members.items() if pk not in judged)
    if not left and not joined:
        return None
    return {"left": ", ".join(left), "joined": ", ".join(joined)}


def run_history(cluster, can_update: bool = False, limit=10) -> list[dict]:
    """The cluster's last runs, newest first: when, who, how long, verdicts, jobs; 교체 is
    offered on the latest run's 불량 members that are still members and not on their way."""
    operations = (
        Operation.objects.filter(cluster=cluster, kind=Operation.Kind.VALIDATE)
        .select_related("actor", "validation")
        .order_by("-created_at")[:limit]
    )
    history: list = []
    recorded = set(
        ValidationBaseline.objects.filter(run__in=[o.pk for o in operations]).values_list(
            "run_id", flat=True
        )
    )
    current = dict(cluster.members.values_list("pk", "status"))
    names = dict(cluster.members.values_list("pk", "name"))
    # Not on a member on its way somewhere (stopping for a 교체 already under way, say).
    members = {pk for pk, status in current.items() if status not in VM_TRANSITIONAL}
    for operation in operations:
        run = getattr(operation, "validation", None)
        if run is None:
            continue
        verdicts = list(run.verdicts.all())
        changed = membership_since(verdicts, names) if run.finished_at else None
        jobs = list(run.jobs.exclude(kind=ValidationJob.Kind.IB_SERVER).order_by("phase", "pk"))
        history.append(
            {
                "operation": operation,
                "run": run,
                "seconds": (
                    (run.finished_at - operation.created_at).total_seconds()
                    if run.finished_at
                    else None
                ),
                "changed": changed,
                "verdicts": [
                    {
                        "verdict": v,
                        "left": v.vm_id not in current,
                        "badge": verdict_badge(v),
                        "reasons": [reason_text(r) for r in v.reasons],
                        "replace_url": replace_url(v, cluster, can_update and not history)
                        if v.vm_id in members
                        else "",
                    }
                    for v in verdicts
                ],
                "jobs": [{"job": job, "summary": job_summary(job)} for job in jobs],
                "baseline_rows": baseline_rows(run, jobs),
                "baseline_recorded": run.pk in recorded,
                "done_jobs": run.jobs.exclude(status__in=("PENDING", "RUNNING")).count(),
                "total_jobs": run.jobs.count(),
            }
        )
    return history
