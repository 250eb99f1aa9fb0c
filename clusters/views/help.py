"""The console's own help: 사전 요건 (which permission each action needs, and whether the
user's role in the current project has it) and "InfiniBand 설정 및 벤치마크" — how to check
the fabric from a member, and what 클러스터 검증 measures against which thresholds.

Opened from a cluster, the benchmark page fills in that cluster's NCCL variables
(``clusters.launch.NCCL_ENV``, the same the 정보 tab prints), its members and its thresholds.
Thresholds are read from the database (``ValidationThreshold``); a pair without a row yet
shows the default a run would make from ``clusters.validation.thresholds``, without writing it.
"""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from clusters.launch import (
    FABRIC_GUIDES,
    MASTER_PORT,
    NCCL_ENV,
    RANK_ORDER,
    launch_plan,
    member_address,
)
from clusters.models.validation import ValidationThreshold
from clusters.validation.plan import IB_MESSAGE_BYTES, IB_SECONDS, NCCL_ARGS
from clusters.validation.thresholds import default_for
from clusters.views.members import readable_cluster
from portal.catalog.models import FabricOffering, FabricType, InstanceType
from portal.foundation.errors import (
    MembersStillRunning,
    NotEnoughMembers,
    SpotOrDrVm,
    VmNotEligible,
)
from portal.iam.permissions import Perm
from vms.models import VirtualMachine

# What each action needs (docs/rules.md#permissions), in the order a user meets them.
REQUIREMENTS = [
    (_("가상 클러스터 목록·상세·메트릭 보기"), [Perm.CLUSTER_READ]),
    (_("가상 클러스터 생성"), [Perm.CLUSTER_CREATE]),
    (_("클러스터 시작·중지, 클러스터 검증"), [Perm.CLUSTER_UPDATE]),
    (_("클러스터 SSH 키 변경"), [Perm.CLUSTER_UPDATE, Perm.SSH_KEY_READ]),
    (_("교체 정책 변경"), [Perm.CLUSTER_UPDATE]),
    (_("예비 가상머신 추가·제외"), [Perm.CLUSTER_UPDATE, Perm.VM_UPDATE]),
    (_("클러스터 삭제"), [Perm.CLUSTER_DELETE]),
    (_("가상머신 보기"), [Perm.VM_READ]),
    (_("가상머신 생성"), [Perm.VM_CREATE]),
    (_("가상머신 편집·시작·중지, 멤버 모두 시작·중지"), [Perm.VM_UPDATE]),
    (_("가상머신 연결·분리, 교체"), [Perm.VM_UPDATE, Perm.CLUSTER_READ]),
    (_("가상머신 삭제"), [Perm.VM_DELETE]),
]
# The member's first HCA and the RoCE GID index NCCL uses (``NCCL_ENV``): ib_write_bw the same.
IB_DEVICE = "mlx5_0"
ROCE_GID_INDEX = dict(NCCL_ENV[FabricType.ROCE_V2])["NCCL_IB_GID_INDEX"]


@login_required
@require_GET
def help_page(request):
    """The product page's statements in the console: 개요, 사용 사례, 사전 요건 (with what the
    user's role may do), 패브릭 타입, the three steps, 연결 가능 상태, 클러스터 상태 and the
    detail page's tabs."""
    project = request.project
    rows = [
        {
            "action": action,
            # Break a long permission name only at its dots (a phone's narrow column).
            "perms": [
                format_html_join(mark_safe(".<wbr>"), "{}", ((w,) for w in p.split(".")))
                for p in perms
            ],
            "granted": project is not None
            and all(request.user.has_perm(p, project) for p in perms),
        }
        for action, perms in REQUIREMENTS
    ]
    context = {
        "requirements": rows,
        "project": project,
        # The attach rules in their own words (each message lives in its error class).
        "attach_rules": [VmNotEligible().message, SpotOrDrVm().message],
        # 3단계 quotes the start and stop refusals as the header shows them.
        "start_rule": NotEnoughMembers().message,
        "stop_rule": MembersStillRunning().message,
    }
    return render(request, "clusters/help.html", context)


@login_required
@require_GET
def infiniband_page(request, pk=None):
    """How to check the fabric, generic or for cluster ``pk`` (404 unless readable)."""
    cluster = readable_cluster(request, pk) if pk is not None else None
    context = {
        "cluster": cluster,
        "nccl_args": " ".join(NCCL_ARGS),
        "guide": FABRIC_GUIDES[cluster.fabric_type] if cluster is not None else None,
        "guides": FABRIC_GUIDES,
        "master_port": MASTER_PORT,
        "roce_flags": _ib_flags(FabricType.ROCE_V2),
        "roce_env": "\n".join(f"export {k}={v}" for k, v in NCCL_ENV[FabricType.ROCE_V2]),
    }
    if cluster is None:
        context["thresholds"] = _all_thresholds()
        return render(request, "clusters/infiniband.html", context)
    members = []
    if request.user.has_perm(Perm.VM_READ, cluster):
        members = list(
            VirtualMachine.objects.restrict(request.user, Perm.VM_READ)
            .filter(cluster=cluster)
            .order_by(*RANK_ORDER)
        )
    plan = launch_plan(cluster, members)
    gpus = cluster.instance_type.gpu_count
    hosts = [member_address(vm) or "<member-ip>" for vm in members] or ["<ip-1>", "<ip-2>"]
    threshold = _threshold(cluster.instance_type, cluster.fabric_type)
    context.update(
        members=members,
        nccl_env=plan.env_lines,
        env_names=[key for key, _value in plan.nccl_env],
        gpus=gpus,
        np=gpus * len(hosts),
        host_list=",".join(f"{h}:{gpus}" for h in hosts),
        server=hosts[0],
        ib_flags=_ib_flags(cluster.fabric_type),
        thresholds=[threshold],
        threshold=threshold,
    )
    return render(request, "clusters/infiniband.html", context)


def _ib_flags(fabric) -> str:
    """ib_write_bw's options as 검증 runs it (one port, 1 MiB messages, a few seconds)."""
    flags = f"-d {IB_DEVICE} -s {IB_MESSAGE_BYTES} -D {IB_SECONDS} -F --report_gbits"
    return f"{flags} -x {ROCE_GID_INDEX}" if fabric == FabricType.ROCE_V2 else flags


def _threshold(instance_type, fabric):
    """The stored row, or an unsaved one with the default a run would store."""
    row = ValidationThreshold.objects.filter(instance_type=instance_type, fabric=fabric).first()
    if row is None:
        row = ValidationThreshold(
            instance_type=instance_type,
            fabric=fabric,
            **default_for(instance_type, fabric).__dict__,
        )
        row.is_default = True
    return row


def _all_thresholds():
    """One row per offered (instance type, fabric): the stored row, else the default."""
    stored = {(t.instance_type_id, t.fabric): t for t in ValidationThreshold.objects.all()}
    types = InstanceType.objects.in_bulk()
    pairs = (
        FabricOffering.objects.order_by("instance_type__code", "fabric")
        .values_list("instance_type", "fabric")
        .distinct()
    )
    return [
        stored.get((type_id, fabric)) or _threshold(types[type_id], fabric)
        for type_id, fabric in pairs
    ]
