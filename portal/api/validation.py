"""클러스터 검증 and 교체 on the API: start a run, read the runs with their
verdicts and figures, swap a member for a spare. Each change is one ``clusters.operations``
call answered 202 with its Operation, like every other change; a run's verdicts are read
here once its Operation is done."""

from ninja import Query, Router

from clusters import operations as ops
from clusters.models import Operation
from clusters.models.validation import ValidationJob, ValidationVerdict, Verdict
from clusters.validation import display
from clusters.validation.verdict import reason_text
from portal.api import pagination
from portal.api.clusters import ACCEPTED, readable_cluster
from portal.api.common import actor, json_response, labels, path_id
from portal.api.operations import accepted
from portal.api.schemas import Problem, QueryBool, ReplaceIn, ValidateIn, ValidationPage
from portal.errors import ClusterNotFound
from portal.kernel import check_perm
from portal.permissions import Perm

router = Router(tags=["virtual-clusters"])
ORDERS = pagination.orders("created_at")


class ValidationFilters(pagination.PageRequest):
    order_by: str = "-created_at"
    include_raw: QueryBool = False


@router.post(
    "/virtual-clusters/{int:cluster_id}:validate", response=ACCEPTED, summary="클러스터 검증"
)
def validate_cluster(request, cluster_id: int, payload: ValidateIn | None = None):
    """A validation run on the running members (``{"level": 2}`` for ``dcgmi diag -r 2``,
    about 2 minutes; 1 by default). Done when every member has a verdict: read them with
    ``GET /virtual-clusters/{id}/validations`` (an item that failed is a member judged 불량
    or 응답 없음)."""
    cid = path_id(cluster_id, ClusterNotFound)
    level = 1 if payload is None else payload.level
    return accepted(
        request,
        lambda claim: ops.start_validation(
            cid, actor=actor(request), level=level, idempotency=claim
        ),
    )


@router.post(
    "/virtual-clusters/{int:cluster_id}/members/{int:vm_id}:replace",
    response=ACCEPTED,
    summary="멤버 교체",
)
def replace_member(request, cluster_id: int, vm_id: int, payload: ReplaceIn):
    """Swap the member ``vm_id`` for the stopped spare ``spare_vm_id`` (the attach rules
    hold for it): the member is stopped if it runs and detached, the spare attached at the
    member's node_rank and started if the cluster runs. One Operation: item 0 the member,
    item 1 the spare."""
    cid = path_id(cluster_id, ClusterNotFound)
    return accepted(
        request,
        lambda claim: ops.replace_member(
            cid, vm_id, payload.spare_vm_id, actor=actor(request), idempotency=claim
        ),
    )


@router.get(
    "/virtual-clusters/{int:cluster_id}/validations",
    response={200: ValidationPage, 403: Problem},
    summary="검증 기록",
)
def list_validations(request, cluster_id: int, filters: Query[ValidationFilters]):
    """The cluster's runs, newest first: who started them, when, how long they took, the
    thresholds they were judged by, each member's verdict with its reasons, and every
    check's figures (``include_raw=true`` adds the tools' raw output). Member details need
    Resource.VirtualMachine.Read, as on the console."""
    cluster = readable_cluster(request, cluster_id)
    check_perm(actor(request), Perm.VM_READ, cluster)
    runs = Operation.objects.filter(cluster=cluster, kind=Operation.Kind.VALIDATE).select_related(
        "actor", "validation"
    )
    rows, next_token = pagination.page(runs, ORDERS, filters)
    shown = [row for row in rows if hasattr(row, "validation")]
    jobs, verdicts = _details([row.pk for row in shown], filters.include_raw)
    names = {
        "verdict": labels(Verdict),
        "kind": labels(ValidationJob.Kind),
        "status": labels(ValidationJob.Status),
    }
    items = [
        run_json(row, verdicts.get(row.pk, []), jobs.get(row.pk, []), names, filters.include_raw)
        for row in shown
    ]
    return json_response({"items": items, "next_page_token": next_token})


def _details(run_ids: list[int], include_raw: bool) -> tuple[dict, dict]:
    """The runs' jobs and verdicts in two queries, by run id (the tools' raw output, the
    bulk of a job's row, only when asked for)."""
    jobs: dict = {}
    verdicts: dict = {}
    rows = ValidationJob.objects.filter(run_id__in=run_ids).order_by("phase", "pk")
    for job in rows if include_raw else rows.defer("raw"):
        if job.kind != ValidationJob.Kind.IB_SERVER:  # the other end of an ib_write_bw
            jobs.setdefault(job.run_id, []).append(job)
    for verdict in ValidationVerdict.objects.filter(run_id__in=run_ids).order_by("vm_name"):
        verdicts.setdefault(verdict.run_id, []).append(verdict)
    return jobs, verdicts


def run_json(operation, verdicts, jobs, names: dict, include_raw: bool) -> dict:
    run = operation.validation
    finished = run.finished_at
    return {
        "operation_id": operation.pk,
        "cluster_id": operation.cluster_id,
        "actor": operation.actor.get_username() if operation.actor else None,
        "level": run.level,
        "done": finished is not None,
        "created_at": operation.created_at,
        "finished_at": finished,
        "seconds": (finished - operation.created_at).total_seconds() if finished else None,
        "thresholds": run.thresholds,
        "verdicts": [
            {
                "vm_id": v.vm_id,
                "vm_name": v.vm_name,
                "verdict": v.verdict,
                "verdict_label": names["verdict"][v.verdict],
                "reasons": [dict(reason, message=reason_text(reason)) for reason in v.reasons],
            }
            for v in verdicts
        ],
        "checks": [job_json(job, names, include_raw) for job in jobs],
    }


def job_json(job: ValidationJob, names: dict, include_raw: bool) -> dict:
    data = {
        "id": job.pk,
        "kind": job.kind,
        "kind_label": names["kind"][job.kind],
        "phase": job.phase,
        "vm_id": job.vm_id,
        "vm_name": job.vm_name,
        "peers": job.peers,
        "status": job.status,
        "status_label": names["status"][job.status],
        "seconds": job.seconds,
        "summary": display.job_summary(job),
        "figures": job.figures,
    }
    if include_raw:
        data["raw"] = job.raw
    return data
