"""virtual-clusters: list, read, create, delete, start, stop, members, hostfile, launch.
Reads go through ``restrict()``; every change is a ``clusters.operations`` call
answered 202 with its Operation."""

from django.db.models import F
from django.http import HttpResponse
from ninja import Query, Router

from clusters import operations as ops
from clusters import services
from clusters.launch import RANK_ORDER, hostfile_text, launch_plan
from clusters.models import ClusterStatus, VirtualCluster
from metrics import federate
from metrics.storage import exposition, straggler
from portal.api import pagination
from portal.api.common import (
    ListFilters,
    actor,
    filtered,
    member_count,
    path_id,
    project,
    visible,
)
from portal.api.inputs import AttachIn, ClusterCreateIn, ClusterUpdateIn, StopIn
from portal.api.operations import change
from portal.api.schemas import (
    ClusterDetailOut,
    ClusterPage,
    LaunchOut,
    OperationOut,
    Problem,
    StragglerOut,
    VmPage,
    read,
)
from portal.api.vms import VmFilters, readable_vms, vm_page
from portal.foundation.errors import ClusterNotFound, RuleViolation
from portal.foundation.errors.api import RequestInvalid
from portal.foundation.kernel import check_perm, validate_name
from portal.iam.permissions import Perm
from portal.models import permitted_projects, readable
from vms.models import VirtualMachine, VmStatus

router = Router(tags=["virtual-clusters"])
ORDERS = pagination.orders("created_at", "name")


class ClusterFilters(ListFilters):
    order_by: str = "-created_at"


MEMBERS = member_count()
RUNNING_MEMBERS = member_count(VmStatus.RUNNING)


def cluster_rows(user):
    """The clusters ``user`` may read as ``ClusterOut`` reads them: with their zone's and
    type's codes and their member counts (SQL subqueries, for the rows fetched only)."""
    return readable(user, Perm.CLUSTER_READ, VirtualCluster).annotate(
        zone_code=F("zone__code"),
        type_code=F("instance_type__code"),
        member_count=MEMBERS,
        running_member_count=RUNNING_MEMBERS,
    )


def readable_cluster(request, cluster_id: int) -> VirtualCluster:
    clusters = readable(actor(request), Perm.CLUSTER_READ, VirtualCluster)
    return clusters.select_related("instance_type").get_or_404(cluster_id)


@router.get("/virtual-clusters", response=ClusterPage, summary="가상 클러스터 목록")
def list_clusters(request, filters: Query[ClusterFilters]):
    """Filters as on the console (삭제됨 is hidden unless ``status`` asks for it); keyset
    pages, ``order_by`` one of created_at, -created_at, name, -name."""
    clusters = filtered(cluster_rows(actor(request)), filters, ClusterStatus.values)
    return read(ClusterPage, pagination.page(clusters, ORDERS, filters))


@router.get(
    "/virtual-clusters/{int:cluster_id}", response=ClusterDetailOut, summary="가상 클러스터"
)
def get_cluster(request, cluster_id: int):
    """The cluster, and (to whom may read SSH keys) the keys its members get beside their own."""
    cluster = cluster_rows(actor(request)).get_or_404(cluster_id)
    chosen = VirtualCluster.ssh_keys.through.objects.filter(virtualcluster_id=cluster.pk)
    cluster.ssh_key_ids = sorted(chosen.values_list("sshkey_id", flat=True))
    return read(ClusterDetailOut, cluster, **visible(request))


@router.get(
    "/virtual-clusters/{int:cluster_id}/members", response=VmPage, summary="연결된 가상머신"
)
def list_members(request, cluster_id: int, filters: Query[VmFilters]):
    # A member is in its cluster's project (the attach rule), so its cluster is readable
    # where the VM's own project grants cluster read: a condition on the VM row, no subquery
    # (a deleted cluster has no members). The cluster is looked up on its own only for an
    # empty page: a cluster the caller may not read is a 404, as everywhere.
    user = actor(request)
    cid = path_id(cluster_id, ClusterNotFound)
    members = readable_vms(user).filter(cluster_id=cid)
    page = vm_page(request, members.within(permitted_projects(user, Perm.CLUSTER_READ)), filters)
    if not page.items:
        readable(user, Perm.CLUSTER_READ, VirtualCluster).get_or_404(cid)
    return page


def _members(request, cluster):
    return list(
        VirtualMachine.objects.restrict(actor(request), Perm.VM_READ)
        .filter(cluster=cluster)
        .order_by(*RANK_ORDER)
    )


@router.get(
    "/virtual-clusters/{int:cluster_id}/hostfile",
    summary="호스트 파일 (MPI hostfile)",
    openapi_extra={
        "responses": {
            200: {
                "description": "One line per member: IP slots=GPUs",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        }
    },
)
def get_hostfile(request, cluster_id: int):
    cluster = readable_cluster(request, cluster_id)
    return HttpResponse(
        hostfile_text(cluster, _members(request, cluster)),
        content_type="text/plain; charset=utf-8",
    )


@router.get(
    "/virtual-clusters/{int:cluster_id}/metrics",
    response={403: Problem},
    summary="메트릭 (Prometheus)",
    openapi_extra={
        "responses": {
            200: {
                "description": "The members' latest host, GPU and port samples, in the "
                "Prometheus text format (metrics/README.md), for a Prometheus of your own",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        }
    },
)
def get_metrics(request, cluster_id: int):
    """What ``/metrics/federate/`` gives a configured scraper, for one cluster, with an API
    token: point a scrape job at it (``authorization: Bearer vcp_…``). Every series is
    labelled with a member's name and id: VM data, so it needs Resource.VirtualMachine.Read
    too, as the console's per-member figures do."""
    cluster = readable_cluster(request, cluster_id)
    check_perm(actor(request), Perm.VM_READ, cluster)
    members = federate.members_of(cluster.project, cluster.pk)
    return HttpResponse(exposition.render(members), content_type=exposition.CONTENT_TYPE)


@router.get(
    "/virtual-clusters/{int:cluster_id}/straggler",
    response={200: StragglerOut, 403: Problem},
    summary="느린 멤버",
)
def get_straggler(request, cluster_id: int):
    """The 메트릭 tab's straggler over the last hour: the member and GPU, and the port, whose
    gap to the cluster median stayed past the 검증 기준's straggler criteria; null when the
    cluster has none, ``lines`` saying so. Member names are VM data: Resource.VirtualMachine.Read
    too, as on the tab."""
    cluster = readable_cluster(request, cluster_id)
    check_perm(actor(request), Perm.VM_READ, cluster)
    return read(StragglerOut, straggler.cluster_view(cluster, STRAGGLER_SECONDS))


STRAGGLER_SECONDS = 3600  # the 메트릭 tab's default range


@router.get(
    "/virtual-clusters/{int:cluster_id}/launch", response=LaunchOut, summary="torchrun 실행"
)
def get_launch(request, cluster_id: int):
    """The torchrun command of each rank and the fabric's NCCL environment, as on the 정보
    tab (members in node_rank order, so a 교체 spare keeps the replaced member's place;
    rank 0's address is the master)."""
    cluster = readable_cluster(request, cluster_id)
    return read(LaunchOut, launch_plan(cluster, _members(request, cluster)))


# ---------------------------------------------------------------------------------------------
# Changes: each one clusters.operations call, answered 202 with its Operation

ACCEPTED = {202: OperationOut}


@router.post("/virtual-clusters", response=ACCEPTED, summary="가상 클러스터 생성")
def create_cluster(request, payload: ClusterCreateIn):
    """An empty cluster (준비중, then 미할당); the Operation is done when it is 미할당."""
    return change(request, ops.create_cluster_op, project=project(request), **payload.dict())


@router.patch(
    "/virtual-clusters/{int:cluster_id}", response=ClusterDetailOut, summary="가상 클러스터 변경"
)
def update_cluster(request, cluster_id: int, payload: ClusterUpdateIn):
    """``name`` renames it; ``ssh_key_ids`` replaces the SSH keys its members get beside their
    own, from each member's next start. Each is its own Operation; with both, a refusal of
    either changes neither (the keys are asked first)."""
    user, cid = actor(request), path_id(cluster_id, ClusterNotFound)
    sent = payload.dict(exclude_unset=True, exclude_none=True)
    if not sent:
        raise RequestInvalid(field="body", name="name, ssh_key_ids")
    if len(sent) == 2:
        cluster = readable(user, Perm.CLUSTER_READ, VirtualCluster).get_or_404(cid)
        if services.preflight_ssh_keys(user, cluster, payload.ssh_key_ids) is not None:
            del sent["name"]  # the keys' own refusal answers, audited, and nothing changes
        elif _rename_refusal(user, cluster, payload.name) is not None:
            del sent["ssh_key_ids"]  # the rename's own refusal answers
    if "ssh_key_ids" in sent:
        ops.cluster_ssh_keys_op(cid, actor=user, ssh_key_ids=payload.ssh_key_ids)
    if "name" in sent:
        ops.rename_cluster_op(cid, actor=user, name=payload.name)
    return get_cluster(request, cluster_id)


def _rename_refusal(user, cluster: VirtualCluster, raw: str | None) -> RuleViolation | None:
    """Whether renaming ``cluster`` to ``raw`` would be refused: the name rule, then the
    rename's own."""
    try:
        name = validate_name(raw)
    except RuleViolation as exc:
        return exc
    return services.preflight_rename(user, cluster, name)


@router.delete(
    "/virtual-clusters/{int:cluster_id}", response=ACCEPTED, summary="가상 클러스터 삭제"
)
def delete_cluster(request, cluster_id: int):
    return change(request, ops.delete_cluster_op, path_id(cluster_id, ClusterNotFound))


@router.post("/virtual-clusters/{int:cluster_id}:start", response=ACCEPTED, summary="클러스터 시작")
def start_cluster(request, cluster_id: int):
    """Done when the cluster is 실행중, or back where it was with the reason as its error."""
    return change(request, ops.start_cluster_op, path_id(cluster_id, ClusterNotFound))


@router.post("/virtual-clusters/{int:cluster_id}:stop", response=ACCEPTED, summary="클러스터 중지")
def stop_cluster(request, cluster_id: int, payload: StopIn | None = None):
    """``{"stop_members": true}`` stops the running members first (멤버 가상머신도 함께 중지)."""
    stop_members = payload is not None and payload.stop_members
    cid = path_id(cluster_id, ClusterNotFound)
    return change(request, ops.stop_cluster_op, cid, stop_members=stop_members)


@router.post(
    "/virtual-clusters/{int:cluster_id}/members", response=ACCEPTED, summary="가상머신 연결"
)
def attach_members(request, cluster_id: int, payload: AttachIn):
    """One Operation, an item per VM, each by the attach rule (one refusal blocks no other)."""
    return change(request, ops.attach_many, path_id(cluster_id, ClusterNotFound), payload.vm_ids)


@router.delete(
    "/virtual-clusters/{int:cluster_id}/members/{int:vm_id}",
    response=ACCEPTED,
    summary="가상머신 분리",
)
def detach_member(request, cluster_id: int, vm_id: int):
    return change(request, ops.detach_many, path_id(cluster_id, ClusterNotFound), [vm_id])
