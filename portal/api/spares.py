"""A cluster's 예비 and its 교체 정책 (docs/rules.md#spares, #a-clusters-policy): list, add
and remove spares; read and set the policy. Each change is one ``clusters.operations`` call
answered 202 with its Operation."""

from ninja import Query, Router

from clusters import operations as ops
from portal.api.clusters import ACCEPTED, readable_cluster
from portal.api.common import actor, path_id
from portal.api.inputs import PolicyIn, SpareIn
from portal.api.operations import change
from portal.api.schemas import PolicyOut, Problem, VmPage, read
from portal.api.vms import VmFilters, readable_vms, vm_page
from portal.foundation.errors import ClusterNotFound

router = Router(tags=["virtual-clusters"])


@router.get(
    "/virtual-clusters/{int:cluster_id}/spares",
    response={200: VmPage, 403: Problem},
    summary="예비 가상머신 목록",
)
def list_spares(request, cluster_id: int, filters: Query[VmFilters]):
    """The VMs the cluster keeps for its 교체: stopped, no members (no rank), held for it."""
    cluster = readable_cluster(request, cluster_id)
    spares = readable_vms(actor(request)).filter(spare_of__cluster=cluster)
    return vm_page(request, spares, filters)


@router.post(
    "/virtual-clusters/{int:cluster_id}/spares", response=ACCEPTED, summary="예비 가상머신 추가"
)
def add_spare(request, cluster_id: int, payload: SpareIn):
    """Keep a stopped on-demand or reserved VM of the cluster's zone and type as a 예비
    (CLUSTER UPDATE and VM UPDATE)."""
    cid = path_id(cluster_id, ClusterNotFound)
    return change(request, ops.spare_add_op, cid, payload.vm_id)


@router.delete(
    "/virtual-clusters/{int:cluster_id}/spares/{int:vm_id}",
    response=ACCEPTED,
    summary="예비 가상머신 제외",
)
def remove_spare(request, cluster_id: int, vm_id: int):
    return change(request, ops.spare_remove_op, path_id(cluster_id, ClusterNotFound), vm_id)


@router.get("/virtual-clusters/{int:cluster_id}/policy", response=PolicyOut, summary="교체 정책")
def get_policy(request, cluster_id: int):
    """What a member judged 불량 leads to, who set it and when."""
    return read(PolicyOut, readable_cluster(request, cluster_id))


@router.put(
    "/virtual-clusters/{int:cluster_id}/policy", response=ACCEPTED, summary="교체 정책 변경"
)
def set_policy(request, cluster_id: int, payload: PolicyIn):
    """``notify`` (알림만), ``propose`` (교체 제안) or ``auto`` (자동 교체); CLUSTER UPDATE."""
    cid = path_id(cluster_id, ClusterNotFound)
    return change(request, ops.policy_op, cid, policy=payload.policy)
