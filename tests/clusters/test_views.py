"""The rules as a user meets them on the pages: Korean message in place, right status, no 500."""

import re
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.urls import reverse

from clusters.models import ClusterStatus, VirtualCluster
from clusters.templatetags.cluster_tags import torchrun_blocks
from portal.catalog.models import FabricType
from tests.pages import HX, body
from vms.models import VmStatus


def test_cluster_list_shows_columns_and_create_button(world, login):
    cluster = world.cluster("train-ib")
    world.members(cluster, 2)
    page = body(login("admin").get("/clusters/"))
    for text in (
        "train-ib",
        "미할당",
        "InfiniBand",
        "gpu.h100x8",
        "kr-central-1a",
        "가상 클러스터 생성",
    ):
        assert text in page
    # A viewer sees the button disabled, with the permission it lacks.
    page = body(login("viewer").get("/clusters/"))
    assert 'href="/clusters/new/"' not in page
    assert 'disabled aria-describedby="create-reason">가상 클러스터 생성</button>' in page
    assert 'id="create-reason" role="note">권한 없음: Resource.VirtualCluster.CREATE</p>' in page


def test_cluster_list_filters(world, login):
    world.cluster("alpha", status=ClusterStatus.RUNNING)
    world.cluster("beta", zone=world.zone_b)
    client = login("admin")
    running = body(client.get("/clusters/?status=RUNNING"))
    assert "alpha" in running and "beta" not in running
    page = body(client.get(f"/clusters/?zone={world.zone_b.pk}"))
    assert "beta" in page and "alpha" not in page
    assert client.get("/clusters/?status=<script>&zone=abc&page=zz").status_code == 200


def test_create_form_narrows_types_and_fabrics(world, login):
    client = login("admin")
    fields = body(
        client.get(f"/clusters/new/options/?zone={world.zone_a.pk}&instance_type={world.l40s.pk}")
    )
    assert 'value="ROCE_V2"' in fields and 'value="INFINIBAND"' not in fields


def test_create_via_htmx_redirects_to_the_new_cluster(world, login):
    client = login("admin")
    response = client.post(
        "/clusters/new/",
        {
            "name": "new-one",
            "zone": world.zone_a.pk,
            "instance_type": world.h100.pk,
            "fabric_type": FabricType.INFINIBAND,
        },
        **HX,
    )
    cluster = VirtualCluster.objects.get(name="new-one")
    assert response["HX-Redirect"] == reverse("clusters:cluster_detail", args=[cluster.pk])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": ""}, "필수 항목입니다."),
        ({"name": "<b>x</b>"}, "이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다."),
        ({"fabric": "INFINIBAND", "type": "l40s"}, "올바르게 선택해 주세요."),
    ],
)
def test_create_form_errors_inline_in_korean(world, login, data, message):
    itype = world.l40s if data.get("type") == "l40s" else world.h100
    response = login("admin").post(
        "/clusters/new/",
        {
            "name": data.get("name", "ok"),
            "zone": world.zone_a.pk,
            "instance_type": itype.pk,
            "fabric_type": data.get("fabric", FabricType.INFINIBAND),
        },
        **HX,
    )
    assert response.status_code == 422
    assert message in body(response)
    assert "<b>x</b>" not in body(response)  # what the user typed comes back escaped
    if data.get("name") == "<b>x</b>":
        assert 'value="&lt;b&gt;x&lt;/b&gt;"' in body(response)
    assert not VirtualCluster.objects.exists()


def test_duplicate_name_is_a_field_error(world, login):
    world.cluster("dup")
    response = login("admin").post(
        "/clusters/new/",
        {
            "name": "dup",
            "zone": world.zone_a.pk,
            "instance_type": world.h100.pk,
            "fabric_type": FabricType.INFINIBAND,
        },
    )
    assert response.status_code == 422
    assert "이 프로젝트에 같은 이름의 클러스터가 이미 있습니다" in body(response)


def test_start_empty_cluster_shows_reason_and_refuses(world, login):
    cluster = world.cluster()
    client = login("admin")
    # The rule's own sentence, as with one member, which the button points at; the callout
    # says what to do about it, without a second wording of the rule.
    page = body(client.get(f"/clusters/{cluster.pk}/"))
    reason = re.search(r'<p id="start-reason"[^>]*>([^<]*)</p>', page)
    assert reason is not None and reason.group(1) == "가상머신 2대 이상이 필요합니다"
    assert 'disabled aria-describedby="start-reason"' in page and 'id="callout-empty"' in page
    assert "시작하려면" not in page
    world.members(cluster, 1)
    page = body(client.get(f"/clusters/{cluster.pk}/"))
    assert re.search(r'<p id="start-reason"[^>]*>가상머신 2대 이상이 필요합니다</p>', page)
    assert 'id="callout-empty"' not in page
    response = client.post(f"/clusters/{cluster.pk}/start/", **HX)
    assert response.status_code == 409
    assert response["HX-Retarget"] == "#flash"
    assert "가상머신 2대 이상이 필요합니다" in body(response)


def test_stop_with_running_member_is_refused_with_message(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, _b = world.members(cluster, 2)
    a.status = VmStatus.RUNNING
    a.save()
    client = login("operator")
    assert "실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다" in body(
        client.get(f"/clusters/{cluster.pk}/")
    )
    response = client.post(f"/clusters/{cluster.pk}/stop/")
    assert response.status_code == 409
    assert "실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다" in body(response)


def test_start_and_stop_through_the_page(world, login, django_capture_on_commit_callbacks):
    cluster = world.cluster()
    world.members(cluster, 2)
    client = login("operator")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/clusters/{cluster.pk}/start/", **HX)
    assert response.status_code == 200 and "cluster-changed" in response["HX-Trigger"]
    info = body(client.get(f"/clusters/{cluster.pk}/"))
    assert "실행중" in info and "torchrun --nproc_per_node=8 --nnodes=2 --node_rank=1" in info
    assert "--master_port=29500" in info and "NCCL_IB_HCA" in info
    hostfile = body(client.get(f"/clusters/{cluster.pk}/hostfile/"))
    assert hostfile.count("slots=8") == 2
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/clusters/{cluster.pk}/stop/")
    assert "종료됨" in body(client.get(f"/clusters/{cluster.pk}/"))


def test_header_polls_only_while_transitional(world, login):
    client = login("admin")
    settled = world.cluster("settled")
    changing = world.cluster("changing", status=ClusterStatus.PROVISIONING)
    assert "every 2s" not in body(client.get(f"/clusters/{settled.pk}/header/"))
    assert "every 2s" in body(client.get(f"/clusters/{changing.pk}/header/"))


# -- Query budgets: counts do not grow with rows -----------------------------------------


def test_cluster_list_queries_do_not_grow(world, login, django_assert_max_num_queries):
    client = login("admin")
    for i in range(200):
        cluster = world.cluster(f"c{i:03d}")
        if i < 3:
            world.members(cluster, 2)
    with django_assert_max_num_queries(12):
        response = client.get("/clusters/")
    assert body(response).count("<tr>") == 51  # header + 50 rows


def test_members_tab_queries_do_not_grow(world, login, django_assert_num_queries):
    small, big = (
        world.cluster("small", status=ClusterStatus.RUNNING),
        world.cluster("big", status=ClusterStatus.RUNNING),
    )
    world.members(small, 2)
    world.members(big, 64)
    client = login("admin")
    client.get(f"/clusters/{small.pk}/vms/")  # warm the session
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        client.get(f"/clusters/{small.pk}/vms/")
    with CaptureQueriesContext(connection) as many:
        page = body(client.get(f"/clusters/{big.pk}/vms/"))
    assert len(many) == len(few)
    assert page.count("data-vm=") == 64


def test_member_rows_escape_and_offer_the_right_buttons(world, login):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    a, b = world.members(cluster, 2)
    b.status = VmStatus.RUNNING
    b.save()
    a.name = "<img src=x onerror=alert(1)>"  # not possible through the services; escape anyway
    a.save()
    page = body(login("operator").get(f"/clusters/{cluster.pk}/vms/"))
    assert "<img src=x" not in page and "&lt;img src=x" in page
    # Each row's button is submitted through the tab's one form, which carries the token.
    tab = page.split('data-tab="members"')[1]
    assert f'form="member-row-action" formaction="/vms/{a.pk}/start/"' in tab
    assert f'form="member-row-action" formaction="/vms/{b.pk}/stop/"' in tab
    assert re.search(r'<form id="member-row-action" method="post" hidden><input type="hidden"'
                     r' name="csrfmiddlewaretoken" value="\w+"></form>', tab)  # fmt: skip
    rows = tab.split('<tbody role="rowgroup">')[1].split("</tbody>")[0]
    assert rows.count("data-vm=") == 2 and "csrfmiddlewaretoken" not in rows
    viewer_page = body(login("viewer").get(f"/clusters/{cluster.pk}/vms/"))
    assert "/start/" not in viewer_page.split('data-tab="members"')[1]


def test_last_error_is_stored_once_and_shown_in_the_users_language(
    world, login, django_capture_on_commit_callbacks
):
    world.capacity(1)
    cluster = world.cluster()
    world.members(cluster, 2)
    client = login("admin")
    client.post("/i18n/setlang/", {"language": "en", "next": "/clusters/"})
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/clusters/{cluster.pk}/start/")
    cluster.refresh_from_db()
    # Stored as a code, in no language; rendered in the reader's.
    assert cluster.error_code == "capacity_unavailable"
    assert {k: cluster.error_params[k] for k in ("zone", "requested", "available")} == {
        "zone": "kr-central-1a",
        "requested": 2,
        "available": 1,
    }
    page = body(client.get(f"/clusters/{cluster.pk}/"))
    assert "Not enough H100 · InfiniBand nodes in kr-central-1a: 2 requested, 1 available" in page


def test_torchrun_lines_each_with_a_copy_button_for_its_own_line(
    world, login, django_capture_on_commit_callbacks
):
    """The 정보 tab's torchrun blocks (drawn in Python): one per member in rank order, each
    복사 button naming its own line's element, in the reader's language."""
    cluster = world.cluster()
    world.members(cluster, 2)
    client = login("operator")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/clusters/{cluster.pk}/start/", **HX)
    for language, label in (("ko", "복사"), ("en", "Copy")):
        client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
        info = body(client.get(f"/clusters/{cluster.pk}/"))
        buttons = re.findall(r'data-copy="#(torchrun-\d+)">([^<]*)</button>', info)
        lines = dict(re.findall(r'<code id="(torchrun-\d+)">([^<]*)</code>', info))
        assert [target for target, _ in buttons] == ["torchrun-0", "torchrun-1"]
        assert {text for _, text in buttons} == {label}
        for rank, target in enumerate(("torchrun-0", "torchrun-1")):
            assert f"--node_rank={rank} " in lines[target]


def test_torchrun_blocks_escape_what_they_show():
    html = torchrun_blocks([{"vm": SimpleNamespace(name="<b>n</b>"), "line": "a && b <c>"}])
    assert "<b>" not in html and "&lt;b&gt;n&lt;/b&gt;" in html
    assert "a &amp;&amp; b &lt;c&gt;" in html
