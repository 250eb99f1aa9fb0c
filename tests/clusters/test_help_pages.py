"""The product page's statements are all in the console, in Korean and in English: the fabric
descriptions, the status meanings, the VM create rule, the spot notice, the empty states;
사전 요건, the three steps, 연결 가능 상태 and the detail page's tabs on the help page; the
InfiniBand 사용 example on the generic guide, and "InfiniBand 설정 및 벤치마크" filled in from
the cluster it is opened from. Also the
console's own 404/403 pages (with DEBUG on too), the login refusal's wording, and the links
between the console and the API docs."""

import html
import re

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory
from django.urls import reverse

from clusters.models import ClusterStatus
from clusters.models.validation import ValidationThreshold
from clusters.validation.thresholds import Default
from portal.catalog.models import FabricType
from portal.web.middleware import ConsoleErrorPageMiddleware
from vms.models import VmStatus

FABRIC_IB = (
    "InfiniBand 프로토콜 기반 전용 고속 네트워크. 최저 지연·최대 대역폭이 필요한 워크로드용",
    "For workloads that need the lowest latency and the highest bandwidth",
)
FABRIC_ROCE = (
    "RoCEv2 프로토콜 기반 전용 고속 네트워크. Ethernet 기반 환경 호환성 우선",
    "Compatibility with Ethernet-based environments first",
)
FABRIC_CHOICE = (
    "선택은 워크로드 요구사항과 사용 가능한 인스턴스 유형에 따라 달라집니다.",
    "The choice depends on the workload's requirements and the instance types available.",
)
STATUS_MEANINGS = [
    ("프로비저닝 중", "Provisioning in progress"),
    ("클러스터가 만들어졌지만 자원이 할당되지 않은 상태", "no resources are allocated"),
    ("자원이 할당되었으나 아직 실행 전", "Resources are allocated, not running yet"),
    ("클러스터 가동 중", "The cluster is up"),
    ("종료 또는 삭제된 상태", "Stopped or deleted"),
]
SAME_ZONE_TYPE = (
    "클러스터에 추가할 가상머신은 같은 영역·같은 인스턴스 유형으로 생성해야 합니다.",
    "Create the virtual machines to add to a cluster in the same zone and with the same",
)
FIRST_CLUSTER = (
    "먼저 클러스터를 만들어 두고, 별도로 생성한 가상머신을 그 클러스터에 연결하는 흐름입니다.",
    "First create the cluster, then attach separately created virtual machines to it.",
)
PREREQUISITES = (
    "Resource.VirtualCluster.CREATE 권한 "
    "(가상머신 연결 시에는 Resource.VirtualMachine.UPDATE 도 필요)",
    "attaching a virtual machine also needs Resource.VirtualMachine.UPDATE",
)
IB_TITLE = ("InfiniBand 설정 및 벤치마크", "InfiniBand setup and benchmarks")
USE_CASES = [
    ("사용 사례", "Use cases"),
    ("대규모 LLM 사전학습", "Large-scale LLM pre-training"),
    ("수십~수백 GPU 분산 학습", "distributed training over tens to hundreds of GPUs"),
    ("멀티노드 파인튜닝", "Multi-node fine-tuning"),
    ("gradient 동기화 속도 향상", "faster gradient synchronisation"),
    ("HPC 과학 계산", "HPC scientific computing"),
    ("MPI 기반 병렬 시뮬레이션", "MPI-based parallel simulation"),
]
# 1단계's table: what each field of cluster create is.
CREATE_FIELDS = [
    ("식별 이름", "An identifying name"),
    ("클러스터가 배치될 영역", "The zone the cluster is placed in"),
    ("클러스터 멤버에 사용할 인스턴스 유형", "The instance type the cluster's members use"),
    ("InfiniBand 또는 Ethernet(RoCEv2)", "InfiniBand or Ethernet (RoCEv2)"),
]
# The product page's three steps, the attach rule, the start rule as it quotes the portal, the
# detail page's tabs, on the help page; its InfiniBand 사용 example on the generic guide.
STEPS = [
    ("1단계: 클러스터 생성", "Step 1: Create a cluster"),
    ("컴퓨트 > 가상 클러스터로 이동합니다.", "Go to Compute > Virtual clusters."),
    (
        "우측 상단 가상 클러스터 생성 버튼을 클릭합니다.",
        "Click the Create virtual cluster button at the top right.",
    ),
    ("아래 항목을 설정합니다.", "Set the fields below."),
    ("생성을 클릭합니다.", "Click Create."),
    (
        "생성된 클러스터 자체는 빈 상태로 시작합니다. 멤버 가상머신은 별도로 생성한 후 "
        "클러스터에 연결합니다.",
        "A new cluster starts empty.",
    ),
    ("2단계: 가상머신 연결", "Step 2: Attach virtual machines"),
    (
        "컴퓨트 > 가상머신에서 멤버로 사용할 가상머신을 만들거나 기존 가상머신을 엽니다.",
        "In Compute > Virtual machines, create the virtual machine to use as a member",
    ),
    (
        "가상머신 편집 화면의 클러스터 섹션에서 수행할 작업 옵션을 클러스터에 연결로 변경합니다.",
        "set Action to perform to Attach to cluster.",
    ),
    ("연결할 클러스터를 선택하고 저장합니다.", "Choose the cluster to attach to and click Save."),
    (
        "분리할 때는 같은 화면에서 클러스터에서 분리를 선택합니다.",
        "To detach, choose Detach from cluster on the same page.",
    ),
    ("3단계: 클러스터 시작", "Step 3: Start the cluster"),
    (
        "멤버 가상머신이 모두 연결되면 클러스터를 시작합니다.",
        "Once all member virtual machines are attached, start the cluster.",
    ),
    ("시작에는 최소 2대의 가상머신이 필요합니다", "Starting needs at least 2 virtual machines"),
    (
        "연결된 멤버 가상머신이 2대 미만이면 클러스터를 시작할 수 없으며, 포털에 "
        '"가상머신 2대 이상이 필요합니다" 안내가 표시됩니다.',
        'the portal shows "At least 2 virtual machines are required".',
    ),
    (
        "컴퓨트 > 가상 클러스터 목록에서 대상 클러스터를 선택합니다.",
        "In the Compute > Virtual clusters list, choose the cluster.",
    ),
    ("상세 페이지에서 클러스터 시작을 클릭합니다.", "On its detail page, click Start cluster."),
    (
        "상태가 실행중으로 바뀌면 멤버 가상머신들도 개별 시작합니다.",
        "When its status turns Running, start the member virtual machines as well",
    ),
    (
        "중지는 클러스터 중지를 클릭합니다. 이때 실행 중인 가상머신이 있으면 먼저 모든 "
        "가상머신을 종료해야 합니다.",
        "To stop it, click Stop cluster. Stop all running virtual machines first.",
    ),
]
ATTACHABLE = [
    (
        "가상머신은 중지됨 상태일 때만 클러스터에 연결할 수 있습니다.",
        "A virtual machine can be attached to a cluster only while it is Stopped.",
    ),
    (
        "동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다",
        "Only stopped virtual machines of the same instance type can be attached",
    ),
    (
        "스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다",
        "Spot and disaster-recovery (DR) virtual machines cannot be attached",
    ),
]
DETAIL_TABS = [
    ("클러스터 상세 페이지", "Cluster detail page"),
    (
        "일반 정보, 패브릭 타입, 인스턴스 유형, 영역, 생성일",
        "General information, fabric type, instance type, zone, creation date",
    ),
    ("멤버 가상머신 목록과 각 가상머신 상태", "The member virtual machines and the status of each"),
    (
        "클러스터 단위 GPU·CPU·네트워크·메모리 사용량",
        "GPU, CPU, network and memory usage across the cluster",
    ),
]
IB_USAGE = [
    ("InfiniBand 사용", "Using InfiniBand"),
    ("# InfiniBand 장치 확인\nibstat", "# Check the InfiniBand devices\nibstat"),
    (
        "# 멀티노드 PyTorch 분산 학습 예시 (torchrun)\n"
        "torchrun --nproc_per_node=8 --nnodes=4 \\\n  --node_rank=0 \\\n"
        "  --master_addr=<마스터-VM-IP> \\\n  --master_port=29500 \\\n  train.py",
        "# Multi-node PyTorch distributed training (torchrun)\n"
        "torchrun --nproc_per_node=8 --nnodes=4 \\\n  --node_rank=0 \\\n"
        "  --master_addr=<master-VM-IP> \\\n  --master_port=29500 \\\n  train.py",
    ),
]
SPOT = [
    ("가상 클러스터는 스팟 자원을 사용할 수 없습니다", "cannot use spot resources"),
    (
        "멤버 가상머신은 온디맨드 또는 약정형으로 생성하세요.",
        "Create member virtual machines as on-demand or reserved.",
    ),
]

STATEMENTS = [
    ("clusters:cluster_create", [FABRIC_IB, FABRIC_ROCE, FABRIC_CHOICE, *CREATE_FIELDS, *SPOT]),
    ("clusters:cluster_list", STATUS_MEANINGS + [FIRST_CLUSTER] + USE_CASES),
    ("vms:vm_create", [SAME_ZONE_TYPE, *SPOT]),
    ("vms:vm_list", [FIRST_CLUSTER]),
    (
        "clusters:help",
        [PREREQUISITES, FABRIC_IB, FABRIC_ROCE, FABRIC_CHOICE, FIRST_CLUSTER, IB_TITLE]
        + STATUS_MEANINGS
        + USE_CASES
        + CREATE_FIELDS
        + STEPS
        + ATTACHABLE
        + DETAIL_TABS,
    ),
    ("clusters:infiniband_help", [IB_TITLE, *IB_USAGE]),
]


def stored_threshold(instance_type, fabric, figures: Default, margin=10):
    """A 검증 기준 row as an admin would store it, in the shape of the code's defaults."""
    return ValidationThreshold.objects.create(
        instance_type=instance_type, fabric=fabric, margin_percent=margin, **vars(figures)
    )


def body(response):
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.mark.parametrize("language", ["ko", "en"])
@pytest.mark.parametrize(("name", "statements"), STATEMENTS, ids=[s[0] for s in STATEMENTS])
def test_every_statement_of_the_product_page_is_shown(login, name, statements, language):
    client = login("admin")
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    page = html.unescape(body(client.get(reverse(name))))
    for ko, en in statements:
        assert (ko if language == "ko" else en) in page, (ko, en)


@pytest.mark.parametrize("role", ["admin", "operator", "viewer", "other", "norole"])
def test_help_pages_render_for_each_role_with_what_the_role_may_do(world, login, role):
    client = login(role)
    page = body(client.get(reverse("clusters:help")))
    assert "사전 요건" in page and "Resource.VirtualMachine.UPDATE" in page
    granted = page.count('data-granted="yes"')
    # admin (and other, admin of its own project) may do all 12 actions; operator all but the
    # creates and deletes; viewer only the two READ rows; no role, nothing.
    expected = {"admin": 12, "other": 12, "operator": 8, "viewer": 2, "norole": 0}[role]
    assert granted == expected
    assert body(client.get(reverse("clusters:infiniband_help"))).count("all_reduce_perf") >= 2


def test_empty_cluster_list_offers_create_and_a_filtered_one_offers_clearing(world, login):
    client = login("admin")
    page = body(client.get(reverse("clusters:cluster_list")))
    assert 'id="empty-create"' in page and "가상 클러스터 생성" in page
    # What a cluster is for, where a user deciding to make the first one reads.
    assert 'id="empty-use-cases"' in page and "대규모 LLM 사전학습" in page
    world.cluster("train")
    page = body(client.get(reverse("clusters:cluster_list")))
    assert "대규모 LLM 사전학습" not in page
    page = body(client.get(reverse("clusters:cluster_list") + "?q=nomatch"))
    assert "조건에 맞는 가상 클러스터가 없습니다." in page
    assert f'id="clear-filters" href="{reverse("clusters:cluster_list")}"' in page
    assert 'id="empty-create"' not in page and "대규모 LLM 사전학습" not in page
    page = body(client.get(reverse("vms:vm_list") + "?q=nomatch"))
    assert "조건에 맞는 가상머신이 없습니다." in page and "필터 지우기" in page
    # A viewer is not offered what it may not do.
    page = body(login("viewer").get(reverse("clusters:cluster_list") + "?q=zzz&status="))
    assert 'id="empty-create"' not in page
    assert "대규모 LLM 사전학습" not in body(login("admin").get(reverse("vms:vm_list")))


def test_each_create_field_is_described_and_its_control_points_at_it(login):
    """1단계's descriptions are each field's help text, which its control names (a screen
    reader reads it with the field)."""
    page = body(login("admin").get(reverse("clusters:cluster_create")))
    for name, text in [
        ("name", "식별 이름"),
        ("zone", "클러스터가 배치될 영역"),
        ("instance_type", "클러스터 멤버에 사용할 인스턴스 유형"),
        ("fabric_type", "InfiniBand 또는 Ethernet(RoCEv2)"),
    ]:
        helped = re.search(rf'<small[^>]* id="(id_{name}[-_]help(?:text)?)"[^>]*>([^<]*)<', page)
        assert helped is not None and text in helped.group(2), name
        control = re.search(rf'<(?:input|select)[^>]* id="id_{name}"[^>]*>', page, re.S)
        assert control is not None and f'aria-describedby="{helped.group(1)}"' in control.group(0)


def test_the_benchmark_page_of_a_cluster_uses_its_nccl_settings_members_and_thresholds(
    world, login
):
    cluster = world.cluster(
        "roce",
        status=ClusterStatus.RUNNING,
        instance_type=world.l40s,
        fabric_type=FabricType.ROCE_V2,
    )
    for i, vm in enumerate(world.members(cluster, 2, status=VmStatus.RUNNING)):
        vm.private_ip = f"10.0.0.{i + 11}"
        vm.save()
    stored_threshold(
        world.l40s, FabricType.ROCE_V2, Default(2, 200, 21.5, 17.25, 191.0, "admin"), margin=7
    )
    client = login("viewer")
    detail = body(client.get(reverse("clusters:cluster_detail", args=[cluster.pk])))
    ib_url = reverse("clusters:cluster_infiniband", args=[cluster.pk])
    assert f'href="{ib_url}"' in detail
    page = html.unescape(body(client.get(ib_url)))
    assert "export NCCL_IB_GID_INDEX=3" in page and "export NCCL_IB_TC=106" in page
    assert "-H 10.0.0.11:4,10.0.0.12:4 -x NCCL_IB_DISABLE" in page and "-np 8" in page
    assert "ib_write_bw -d mlx5_0 -s 1048576 -D 5 -F --report_gbits -x 3 10.0.0.11" in page
    assert "all_reduce_perf -b 512M -e 8G -f 2 -g 4" in page
    # The thresholds are the database's row, not the code's defaults.
    assert "≥ 22 GB/s" in page and "≥ 17 GB/s" in page and "≥ 191 Gb/s" in page
    assert "7%" in page

    ib = world.cluster("ib", status=ClusterStatus.RUNNING)
    page = html.unescape(body(client.get(reverse("clusters:cluster_infiniband", args=[ib.pk]))))
    assert "NCCL_IB_GID_INDEX" not in page and "NCCL_IB_DISABLE=0" in page
    assert "≥ 460 GB/s" in page and "≥ 375 Gb/s" in page  # the default, shown…
    assert not ValidationThreshold.objects.filter(instance_type=world.h100).exists()  # …not made

    foreign = world.cluster("theirs", project=world.other)
    response = client.get(reverse("clusters:cluster_infiniband", args=[foreign.pk]))
    assert response.status_code == 404


def test_the_generic_benchmark_page_lists_the_stored_thresholds(world, login):
    stored_threshold(
        world.h100, FabricType.INFINIBAND, Default(8, 400, 455.0, 433.0, 377.0, "admin")
    )
    page = html.unescape(body(login("admin").get(reverse("clusters:infiniband_help"))))
    assert "≥ 455 GB/s" in page and "≥ 433 GB/s" in page and "≥ 377 Gb/s" in page
    assert 'data-threshold="gpu.l40sx4/ROCE_V2"' in page


def test_the_benchmark_page_marks_only_the_unstored_rows_as_defaults(world, login):
    stored_threshold(world.h100, FabricType.INFINIBAND, Default(8, 400, 455.0, 433.0, 377.0, "a"))
    page = body(login("admin").get(reverse("clusters:infiniband_help")))
    rows = dict(re.findall(r'<tr data-threshold="([^"]+)"><td>(.*?)</td>', page))
    assert "기본값" not in rows[f"{world.h100.code}/INFINIBAND"]
    assert "(기본값)" in rows["gpu.l40sx4/ROCE_V2"]


@pytest.mark.parametrize("debug", [False, True])
def test_not_found_pages_are_the_consoles_also_with_debug(world, login, settings, debug):
    settings.DEBUG = debug
    client = login("admin")
    foreign = world.cluster("theirs", project=world.other)
    for path in (reverse("clusters:cluster_detail", args=[foreign.pk]), "/no-such-page/"):
        response = client.get(path)
        page = response.content.decode()
        assert response.status_code == 404
        assert 'class="topbar"' in page and 'data-error="404"' in page
        assert "요청한 리소스를 찾을 수 없거나 볼 수 있는 권한이 없습니다." in page
    # The API keeps answering problem+json.
    response = client.get("/api/v1/no-such-thing")
    assert response.status_code == 404 and "problem+json" in response["Content-Type"]


@pytest.mark.parametrize("language", ["ko", "en"])
def test_forbidden_page_is_the_consoles(world, language):
    request = RequestFactory().get("/clusters/")
    request.user = world.admin
    request.project = world.demo
    request.session = {}
    request.COOKIES[settings.LANGUAGE_COOKIE_NAME] = language
    from django.utils import translation

    with translation.override(language):
        response = ConsoleErrorPageMiddleware(lambda r: None).process_exception(
            request, PermissionDenied()
        )
    page = response.content.decode()
    assert response.status_code == 403 and 'class="topbar"' in page
    assert {"ko": "권한이 없습니다", "en": "Not allowed"}[language] in page


def test_login_refusal_is_in_the_consoles_words(world, client):
    response = client.post("/login/", {"username": "admin", "password": "wrong"})
    page = response.content.decode()
    assert "사용자 이름 또는 비밀번호가 올바르지 않습니다. 다시 입력하세요." in page
    assert "대문자와 소문자" not in page  # Django's own sentence


def test_api_docs_are_linked_from_the_console_and_back(login):
    client = login("admin")
    docs = reverse("api:openapi-view")
    assert f'href="{docs}"' in body(client.get(reverse("clusters:cluster_list")))
    page = body(client.get(docs))
    assert f'href="{reverse("clusters:cluster_list")}"' in page and "콘솔로 돌아가기" in page


def running_with_members(world, name, fabric, instance_type):
    cluster = world.cluster(
        name, status=ClusterStatus.RUNNING, instance_type=instance_type, fabric_type=fabric
    )
    for i, vm in enumerate(world.members(cluster, 2, status=VmStatus.RUNNING, prefix=name)):
        vm.private_ip = f"10.0.1.{i + 11}"
        vm.save()
    return cluster


def test_a_roce_cluster_is_told_the_roce_commands_not_ibstat(world, login):
    """The 정보 tab and the benchmark page speak the cluster's fabric: RoCEv2 checks its
    device with ibv_devinfo and show_gids, and its guide is the RoCE one."""
    roce = running_with_members(world, "roce", FabricType.ROCE_V2, world.l40s)
    ib = running_with_members(world, "ib", FabricType.INFINIBAND, world.h100)
    client = login("viewer")
    info = html.unescape(body(client.get(reverse("clusters:cluster_detail", args=[roce.pk]))))
    assert "RoCE 장치 확인" in info and "ibv_devinfo -d mlx5_0\nshow_gids mlx5_0" in info
    assert "ibstat" not in info and "InfiniBand 장치 확인" not in info
    assert "RoCE 설정 및 벤치마크</a>를 참고하세요." in info and "InfiniBand 설정" not in info
    assert "export NCCL_IB_GID_INDEX=3" in info
    guide = html.unescape(body(client.get(reverse("clusters:cluster_infiniband", args=[roce.pk]))))
    assert "<h1>RoCE 설정 및 벤치마크</h1>" in guide
    assert "ibstat" not in guide.replace("ibstat 대신", "") and "show_gids mlx5_0" in guide
    # InfiniBand keeps the product page's words.
    info = html.unescape(body(client.get(reverse("clusters:cluster_detail", args=[ib.pk]))))
    assert "InfiniBand 장치 확인" in info and '<code id="cmd-device-check">ibstat</code>' in info
    assert "InfiniBand 설정 및 벤치마크</a>를 참고하세요." in info and "show_gids" not in info
    guide = body(client.get(reverse("clusters:cluster_infiniband", args=[ib.pk])))
    assert "<h1>InfiniBand 설정 및 벤치마크</h1>" in guide and "show_gids" not in guide


@pytest.mark.parametrize("language", ["ko", "en"])
def test_the_help_pages_give_roce_its_own_section(login, language):
    client = login("admin")
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    help_page = body(client.get(reverse("clusters:help")))
    assert f'href="{reverse("clusters:infiniband_help")}#roce"' in help_page
    page = html.unescape(body(client.get(reverse("clusters:infiniband_help"))))
    section = page.split('id="roce"')[1].split("</section>")[0]
    assert ("RoCE 설정 및 벤치마크" if language == "ko" else "RoCE setup and benchmarks") in section
    for command in ("ibv_devinfo -d mlx5_0", "show_gids mlx5_0", "export NCCL_IB_GID_INDEX=3"):
        assert command in section
    assert "ib_write_bw -d mlx5_0 -s 1048576 -D 5 -F --report_gbits -x 3 <server-ip>" in section
