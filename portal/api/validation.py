"""클러스터 검증 and 교체 on the API: start a run, read the runs with their
verdicts and figures, swap a member for a spare. Each change is one ``clusters.operations``
call answered 202 with its Operation, like every other change; a run's verdicts are read
here once its Operation is done."""

from django.db.models import F, Prefetch, prefetch_related_objects
from ninja import Query, Router

from clusters import operations as ops
from clusters.models import Operation
from clusters.models.validation import ValidationJob, ValidationVerdict
from portal.api import pagination
from portal.api.clusters import ACCEPTED, readable_cluster
from portal.api.common import actor, path_id
from portal.api.inputs import QueryBool, ReplaceIn, ValidateIn
from portal.api.operations import change
from portal.api.schemas import Problem, ValidationPage, read
from portal.foundation.errors import ClusterNotFound
from portal.foundation.kernel import check_perm
from portal.iam.permissions import Perm

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
    level = 1 if payload is None else payload.level
    return change(request, ops.start_validation, path_id(cluster_id, ClusterNotFound), level=level)


@router.post(
    "/virtual-clusters/{int:cluster_id}/members/{int:vm_id}:replace",
    response=ACCEPTED,
    summary="멤버 교체",
)
def replace_member(request, cluster_id: int, vm_id: int, payload: ReplaceIn):
    """Swap the member ``vm_id`` for the stopped spare ``spare_vm_id`` (the attach rules
    hold for it), or without it the cluster's best 예비 (``no_spare`` when none may): the
    member is stopped if it runs and detached, the spare attached at the member's node_rank
    and started if the cluster runs. One Operation: item 0 the member, item 1 the spare."""
    cid = path_id(cluster_id, ClusterNotFound)
    return change(request, ops.replace_member, cid, vm_id, payload.spare_vm_id)


@router.get(
    "/virtual-clusters/{int:cluster_id}/validations",
    response={200: ValidationPage, 403: Problem},
    summary="검증 기록",
    exclude_unset=True,  # a check's raw output only when asked for
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
    page = pagination.page(runs, ORDERS, filters)
    shown = [row for row in page.items if hasattr(row, "validation")]
    prefetch_related_objects(shown, *_details(filters.include_raw))
    return read(ValidationPage, page._replace(items=shown))


def _details(include_raw: bool) -> tuple[Prefetch, Prefetch]:
    """The runs' checks and verdicts, in a query each for the page: the tools' raw output,
    the bulk of a job's row, only when asked for (as ``raw_output``, what ``CheckOut``
    reads); not the other end of an ib_write_bw."""
    jobs = ValidationJob.objects.exclude(kind=ValidationJob.Kind.IB_SERVER).defer("raw")
    if include_raw:
        jobs = jobs.annotate(raw_output=F("raw"))
    verdicts = ValidationVerdict.objects.order_by("vm_name")
    return (
        Prefetch("validation__jobs", jobs.order_by("phase", "pk")),
        Prefetch("validation__verdicts", verdicts),
    )
