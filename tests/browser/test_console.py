"""The console in Chromium, as a user walks it.

Korean first: the browser context asks for English (``locale="en-US"``), and every page must
still answer in Korean until the user picks English with the switcher.
"""

import re

import pytest
from django.utils import translation
from playwright.sync_api import expect

from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType, InstanceType, Zone
from portal.models import Project
from tests.browser.dialogs import cancel, confirm, confirm_dialog
from vms.models import VirtualMachine

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]

NOT_ENOUGH = "가상머신 2대 이상이 필요합니다"
SPOT_OR_DR = "스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다"
NOT_ELIGIBLE = "동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다"
STILL_RUNNING = "실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다"
CLUSTER = "llm-pretrain"


def english(text):
    with translation.override("en"):
        return translation.gettext(text)


def mark_document(page):
    """Tag the current document; ``same_document`` later proves no reload happened."""
    page.evaluate("window.__consoleTestDocument = true")


def same_document(page):
    return page.evaluate("window.__consoleTestDocument === true")


def force_click(button):
    """Click a disabled button as a stale page would (enable and click in one go, so a
    header refresh cannot swap the element in between)."""
    button.evaluate("button => { button.disabled = false; button.click(); }")


def demo_cluster(name="demo-train", members=0):
    cluster = VirtualCluster.objects.create(
        project=Project.objects.get(slug="demo"),
        name=name,
        zone=Zone.objects.get(code="kr-central-1a"),
        instance_type=InstanceType.objects.get(code="gpu.h100x8"),
        fabric_type=FabricType.INFINIBAND,
        status=ClusterStatus.UNALLOCATED,
    )
    nodes = VirtualMachine.objects.filter(name__startswith="gpu-node-").order_by("name")
    for vm in nodes[:members]:
        vm.cluster = cluster
        vm.save(update_fields=["cluster"])
    return cluster


def test_admin_sees_compute_menu_in_korean_and_switches_to_english_and_back(browser_login, page):
    browser_login("admin")
    html = page.locator("html")
    expect(html).to_have_attribute("lang", "ko")
    menu = page.get_by_role("navigation", name="메뉴")
    expect(menu).to_contain_text("컴퓨트")
    expect(menu.get_by_role("link", name="가상 클러스터")).to_have_attribute("aria-current", "page")
    expect(menu.get_by_role("link", name="가상머신")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_have_text("가상 클러스터")

    page.get_by_role("button", name="English").click()
    expect(html).to_have_attribute("lang", "en")
    for korean in ("컴퓨트", "가상 클러스터", "가상머신"):
        assert english(korean) != korean, f"no English translation for {korean!r}"
    menu = page.get_by_role("navigation", name=english("메뉴"))
    expect(menu).to_contain_text(english("컴퓨트"))
    expect(menu.get_by_role("link", name=english("가상 클러스터"), exact=True)).to_be_visible()
    expect(menu.get_by_role("link", name=english("가상머신"), exact=True)).to_be_visible()
    # The choice sticks across pages.
    menu.get_by_role("link", name=english("가상머신"), exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(english("가상머신"))

    page.get_by_role("button", name="한국어").click()
    expect(html).to_have_attribute("lang", "ko")
    expect(page.get_by_role("heading", level=1)).to_have_text("가상머신")
    expect(page.get_by_role("navigation", name="메뉴")).to_contain_text("컴퓨트")


def open_vm(page, name):
    menu = page.get_by_role("navigation", name="메뉴")
    menu.get_by_role("link", name="가상머신", exact=True).click()
    page.get_by_role("link", name=name, exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(name)
    return page.locator("#cluster-section")


def attach(page, vm_name, cluster_name=CLUSTER):
    """The VM edit page's 클러스터 section: 수행할 작업 = 클러스터에 연결, choose, 저장."""
    section = open_vm(page, vm_name)
    expect(section.get_by_role("heading", name="클러스터")).to_be_visible()
    section.get_by_label("수행할 작업").select_option(label="클러스터에 연결")
    section.get_by_label("연결할 클러스터").select_option(label=cluster_name)
    section.get_by_role("button", name="저장").click()
    return section


def test_cluster_lifecycle_click_by_click(
    browser_login, page, live_server, celery_worker, settings
):
    # Each simulated backend step takes a moment, so the transitional statuses are visible.
    settings.SIMULATOR_STEP_SECONDS = 1.5
    browser_login("admin")

    # 1. Create the cluster from the HTMX panel.
    page.locator("a[hx-target='#create-panel']", has_text="가상 클러스터 생성").click()
    form = page.locator("#create-form")
    expect(form.get_by_role("heading", name="가상 클러스터 생성")).to_be_visible()
    expect(form).to_contain_text("가상 클러스터는 스팟 자원을 사용할 수 없습니다")
    form.get_by_label("클러스터 이름").fill(CLUSTER)
    form.get_by_label("가용 영역").select_option(label="kr-central-1a")
    # The instance types are narrowed by zone, then the fabrics by type (HTMX re-renders).
    form.get_by_label("인스턴스 유형").select_option(
        form.locator("#id_instance_type option", has_text="gpu.h100x8").get_attribute("value")
    )
    fabric = form.get_by_label("패브릭 타입")
    expect(fabric.locator("option")).to_have_text(
        ["패브릭 타입 선택", "InfiniBand", "Ethernet (RoCEv2)"]
    )
    fabric.select_option(label="InfiniBand")
    form.get_by_role("button", name="생성").click()
    page.wait_for_url(re.compile(r"/clusters/\d+/$"))
    mark_document(page)

    header = page.locator("#cluster-header")
    badge = header.locator(".badge")
    expect(header.get_by_role("heading", level=1)).to_have_text(CLUSTER)
    expect(badge).to_have_text("준비중")
    expect(badge).to_have_text("미할당")  # by itself: the header polls while transitional
    assert same_document(page)
    settings.SIMULATOR_STEP_SECONDS = 0.5

    # 2. Starting an empty cluster is not possible, and the reason is on the page.
    start = header.get_by_role("button", name="클러스터 시작")
    expect(start).to_be_disabled()
    # The rule's own sentence, as with one member; the callout says what to do about it.
    expect(header.locator("#start-reason")).to_have_text(NOT_ENOUGH)
    expect(start).to_have_attribute("aria-describedby", "start-reason")
    expect(header.locator("#callout-empty")).to_contain_text("연결된 가상머신이 없습니다.")
    # A stale page (say, another tab) still asks the server, which refuses in place.
    force_click(start)
    confirm(page, says=f"{CLUSTER}을 시작합니다")
    expect(page.locator("#flash")).to_contain_text(NOT_ENOUGH)
    expect(badge).to_have_text("미할당")

    # 3. The spot VM and the running VM can join no cluster: the section says why and takes
    # no input (the server still refuses a forged post, tests/vms).
    for name, reason in (("gpu-spot-01", SPOT_OR_DR), ("gpu-running-01", NOT_ELIGIBLE)):
        section = open_vm(page, name)
        expect(section.locator("#cluster-obstacle")).to_have_text(reason)
        expect(section.get_by_label("수행할 작업")).to_be_disabled()
        expect(section.get_by_role("button", name="저장")).to_be_disabled()
        expect(section).to_contain_text("현재 클러스터: 없음")

    # 4. Two stopped on-demand VMs of the same zone and type are attached.
    for name in ("gpu-node-01", "gpu-node-02"):
        section = attach(page, name)
        expect(section.get_by_role("status")).to_have_text(f"{CLUSTER} 클러스터에 연결했습니다.")
        expect(section.get_by_role("link", name=CLUSTER)).to_be_visible()

    # 5. Start the cluster; 실행중 appears without reloading.
    section.get_by_role("link", name=CLUSTER).click()
    mark_document(page)
    start = header.get_by_role("button", name="클러스터 시작")
    expect(start).to_be_enabled()
    expect(page.locator("#tab-body")).to_contain_text("2대")
    start.click()
    confirm(page, says=f"{CLUSTER}을 시작합니다")
    expect(badge).to_have_text(re.compile("준비중|할당됨|대기중"))
    expect(badge).to_have_text("실행중")
    expect(page.locator("#tab-body")).to_contain_text("torchrun --nproc_per_node=8 --nnodes=2")
    assert same_document(page)

    # The Metrics tab loads its charts lazily, inside the page.
    metrics = page.get_by_role("tab", name="메트릭")
    metrics.click()
    expect(metrics).to_have_attribute("aria-selected", "true")
    expect(page.locator("#metrics-charts")).not_to_contain_text("메트릭을 불러오는 중")

    # 6. Start a member from the 연결된 가상머신 tab.
    tab = page.get_by_role("tab", name="연결된 가상머신")
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("tab", name="정보")).to_have_attribute("aria-selected", "false")
    row = page.locator("#tab-body tr[data-vm='gpu-node-01']")
    row.get_by_role("button", name="시작").click()
    confirm(page, says="gpu-node-01을 시작합니다")
    expect(row.locator(".badge")).to_have_text("실행중")
    expect(page.locator("#tab-body tr[data-vm='gpu-node-02'] .badge")).to_have_text("중지됨")

    # 7. The cluster cannot stop alone while a member runs: the stop dialog says so and
    # offers to stop the members too; without that, its confirm button stays disabled.
    stop = header.get_by_role("button", name="클러스터 중지")
    stop.click()
    dialog = confirm_dialog(page)
    expect(dialog).to_contain_text(STILL_RUNNING)
    expect(dialog.locator("#confirm-ok")).to_be_disabled()
    cancel(page)
    expect(badge).to_have_text("실행중")

    # 8. Stop the member, then the cluster: 종료됨.
    row.get_by_role("button", name="중지").click()
    confirm(page, says="gpu-node-01을 중지합니다")
    expect(row.locator(".badge")).to_have_text("중지됨")
    expect(header.locator("#stop-reason")).to_have_count(0)
    stop.click()
    expect(dialog).not_to_contain_text(STILL_RUNNING)
    confirm(page, says=f"{CLUSTER}을 중지합니다")
    expect(badge).to_have_text("종료됨")
    expect(header.get_by_role("button", name="클러스터 시작")).to_be_enabled()
    assert same_document(page)
    assert VirtualCluster.objects.get(name=CLUSTER).status == ClusterStatus.TERMINATED


def test_viewer_has_no_create_button_and_a_forged_post_is_refused(browser_login, page, live_server):
    cluster = demo_cluster(members=2)
    browser_login("viewer")
    expect(page.get_by_role("heading", level=1)).to_have_text("가상 클러스터")
    expect(page.get_by_role("link", name="demo-train")).to_be_visible()
    expect(page.get_by_role("link", name="가상 클러스터 생성")).to_have_count(0)
    # Shown disabled, with the permission it lacks; so are start and delete on the detail page.
    expect(page.get_by_role("button", name="가상 클러스터 생성")).to_be_disabled()
    expect(page.locator("#create-reason")).to_have_text("권한 없음: Resource.VirtualCluster.CREATE")
    page.get_by_role("link", name="demo-train").click()
    expect(page.locator("#cluster-header .badge")).to_have_text("미할당")
    expect(page.get_by_role("button", name="클러스터 시작")).to_be_disabled()
    expect(page.locator("#start-reason")).to_have_text("권한 없음: Resource.VirtualCluster.UPDATE")

    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}/clusters/new/",
        form={
            "name": "forged",
            "zone": str(cluster.zone_id),
            "instance_type": str(cluster.instance_type_id),
            "fabric_type": FabricType.INFINIBAND,
        },
        headers={"X-CSRFToken": token, "Referer": page.url},
    )
    assert response.status == 403
    assert "Resource.VirtualCluster.CREATE 권한이 필요합니다." in response.text()
    assert not VirtualCluster.objects.filter(name="forged").exists()


def test_other_project_user_gets_404_on_the_demo_cluster(browser_login, page, live_server):
    cluster = demo_cluster()
    browser_login("other")
    expect(page.get_by_role("link", name="demo-train")).to_have_count(0)
    response = page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    assert response.status == 404
    assert "demo-train" not in page.content()
