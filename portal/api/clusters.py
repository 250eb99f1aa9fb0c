"""virtual-clusters: list, read, create, rename, delete, start, stop, members, hostfile,
launch. Reads go through ``restrict()``; every change is a ``clusters.operations`` call
answered 202 with its Operation."""

from django.http import HttpResponse
from ninja import Query, Router

from clusters.launch import hostfile_text, launch_plan
from clusters.models import ClusterStatus, VirtualCluster
from portal.api import pagination
from portal.api.common import ListFilters, actor, error_json, filtered, member_count, path_id
from portal.api.schemas import ClusterOut, ClusterPage, LaunchOut, VmPage
from portal.api.vms import VmFilters, readable_vms, vm_page
from portal.errors import ClusterNotFound
from portal.permissions import Perm
from vms.models import VirtualMachine, VmStatus

router = Router(tags=["virtual-clusters"])
ORDERS = pagination.orders("created_at", "name")


class ClusterFilters(ListFilters):
    order_by: str = "-created_at"


def readable_clusters(user):
    return (
        VirtualCluster.objects.restrict(user, Perm.CLUSTER_READ)
        .select_related("zone", "instance_type")
        .annotate(
            member_count=member_count(),
            running_member_count=member_count(status=VmStatus.RUNNING),
        )
    )


def readable_cluster(request, cluster_id: int) -> VirtualCluster:
    cluster = readable_clusters(actor(request)).filter(
        pk=path_id(cluster_id, ClusterNotFound)
    ).first()
    if cluster is None:
        raise ClusterNotFound()
    return cluster


def cluster_json(cluster: VirtualCluster) -> dict:
    return {
        "id": cluster.pk,
        "project_id": cluster.project_id,
        "name": cluster.name,
        "zone_id": cluster.zone_id,
        "zone": cluster.zone.code,
        "instance_type_id": cluster.instance_type_id,
        "instance_type": cluster.instance_type.code,
        "fabric_type": cluster.fabric_type,
        "status": cluster.status,
        "status_label": str(cluster.get_status_display()),
        "member_count": cluster.member_count,
        "running_member_count": cluster.running_member_count,
        "last_error": error_json(cluster.last_error),
        "created_at": cluster.created_at,
        "status_changed_at": cluster.status_changed_at,
    }


@router.get("/virtual-clusters", response=ClusterPage, summary="가상 클러스터 목록")
def list_clusters(request, filters: Query[ClusterFilters]):
    """Filters as on the console (삭제됨 is hidden unless ``status`` asks for it); keyset
    pages, ``order_by`` one of created_at, -created_at, name, -name."""
    clusters = filtered(readable_clusters(actor(request)), filters, ClusterStatus.values)
    rows, next_token = pagination.page(clusters, ORDERS, filters)
    return {"items": [cluster_json(c) for c in rows], "next_page_token": next_token}


@router.get("/virtual-clusters/{cluster_id}", response=ClusterOut, summary="가상 클러스터")
def get_cluster(request, cluster_id: int):
    return cluster_json(readable_cluster(request, cluster_id))


@router.get("/virtual-clusters/{cluster_id}/members", response=VmPage, summary="연결된 가상머신")
def list_members(request, cluster_id: int, filters: Query[VmFilters]):
    cluster = readable_cluster(request, cluster_id)
    return vm_page(request, readable_vms(actor(request)).filter(cluster=cluster), filters)


def _members(request, cluster):
    return list(
        VirtualMachine.objects.restrict(actor(request), Perm.VM_READ)
        .filter(cluster=cluster)
        .order_by("pk")
    )


@router.get(
    "/virtual-clusters/{cluster_id}/hostfile",
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


@router.get("/virtual-clusters/{cluster_id}/launch", response=LaunchOut, summary="torchrun 실행")
def get_launch(request, cluster_id: int):
    """The torchrun command of each rank and the fabric's NCCL environment, as on the 정보
    tab (rank = member order; rank 0's address is the master)."""
    cluster = readable_cluster(request, cluster_id)
    members = _members(request, cluster)
    plan = launch_plan(cluster, members)
    return {
        "master_addr": plan.master_addr,
        "master_port": plan.master_port,
        "nproc_per_node": plan.nproc_per_node,
        "nnodes": len(members),
        "nccl_env": dict(plan.nccl_env),
        "ranks": [
            {
                "node_rank": rank.node_rank,
                "vm_id": rank.vm.pk,
                "vm_name": rank.vm.name,
                "private_ip": rank.vm.private_ip,
                "command": rank.command,
            }
            for rank in plan.ranks
        ],
    }
