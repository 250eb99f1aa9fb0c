"""What a person sees after acting (issue 41, items 1–3), in Chromium, in Korean, at 1280
and 390 px: a 클러스터 시작 refused for want of capacity is named with its reason in the
header whatever tab is open, until 닫기, and 활동 calls it 실패, never 성공; the 멤버 모두
시작 card counts members as they start and names them, and a cluster start never reads
"0/0"; after a 교체 the replace page says what took the member's place and offers no spare,
the latest 검증 is marked as older than the members, and the members' metrics panel does
not say "발급된 토큰이 없습니다".

``SCREENSHOTS=/some/dir`` saves each page (tests.browser.pages.shoot)."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from clusters import services
from clusters.models import ClusterStatus
from portal.catalog.models import FabricType, InstanceType
from tests.browser.dialogs import confirm
from tests.browser.pages import demo_cluster, demo_placed, shoot, switch_language
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WIDTHS = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]
IDS = ["1280", "390"]
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]
SHORT = "요청 2노드, 가용 1노드"


@pytest.fixture
def roce(demo):
    """The README's capacity error: L40S with RoCEv2 in kr-central-1a has room for one node;
    this cluster has two members. Made before the worker starts (tasks still eager)."""
    admin = get_user_model().objects.get(username="admin")
    l40s = InstanceType.objects.get(code="gpu.l40sx4")
    placed = demo_placed("roce-run", admin)
    placed.update(instance_type_id=l40s.pk, fabric_type=FabricType.ROCE_V2)
    cluster = services.create_cluster(**placed)
    second = vm_services.create_vm(
        actor=admin,
        project=cluster.project,
        name="l40s-node-02",
        zone_id=cluster.zone_id,
        instance_type_id=l40s.pk,
        billing_type=BillingType.ON_DEMAND,
    )
    for vm in (VirtualMachine.objects.get(name="l40s-node-01"), second):
        services.attach_vm(vm.pk, cluster.pk, actor=admin)
    return cluster


@pytest.mark.parametrize("viewport", WIDTHS, ids=IDS)
def test_a_failed_start_is_shown_in_the_header_on_every_tab_until_dismissed(
    roce, browser_login, page, live_server, celery_worker, settings, viewport
):
    settings.SIMULATOR_STEP_SECONDS = 0.3
    page.set_viewport_size(viewport)
    cluster = roce
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    header = page.locator("#cluster-header")
    header.get_by_role("button", name="클러스터 시작").click()
    confirm(page, says="roce-run을 시작합니다")
    outcome = header.locator("#header-outcome")
    expect(outcome).to_contain_text("클러스터 시작 실패")
    expect(outcome).to_contain_text(SHORT)
    expect(header.locator(".badge").first).to_have_text("미할당")
    expect(header).not_to_contain_text("0/0")
    shoot(page, "start-failed-members")
    for tab in ("정보", "메트릭", "활동"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
        expect(page.locator("#header-outcome")).to_contain_text(SHORT)
    # 활동: the admin's start says how it ended, red, never a green 성공.
    row = page.locator("#tab-body tr", has_text="시작하지 못했습니다")
    expect(row).to_contain_text("admin")
    expect(row.locator(".outcome")).to_have_text("실패")
    expect(row.locator(".outcome")).to_have_class(re.compile("outcome-failed"))
    expect(page.locator("#tab-body tr", has_text="클러스터 시작").filter(has_text="admin")
           .locator(".outcome-succeeded")).to_have_count(0)  # fmt: skip
    shoot(page, "start-failed-activity")
    page.locator("#header-outcome-dismiss").click()
    expect(page.locator("#header-outcome")).to_have_count(0)
    page.reload()
    expect(page.locator("#cluster-header .badge").first).to_have_text("미할당")
    expect(page.locator("#header-outcome")).to_have_count(0)


@pytest.fixture
def four(demo):
    """gpu-node-01…04 attached, stopped: made before the worker starts (tasks still eager)."""
    return demo_cluster("count-run", NODES)


@pytest.mark.parametrize("viewport", WIDTHS, ids=IDS)
def test_the_start_card_counts_members_as_they_start(
    four, browser_login, page, live_server, celery_worker, settings, viewport
):
    """Each member's start takes a second on the worker: the card moves past 0/4 while
    members are still starting, names them, and ends at 성공 4/4 with its height kept."""
    page.set_viewport_size(viewport)
    settings.SIMULATOR_STEP_SECONDS = 0.2
    cluster = four
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    header = page.locator("#cluster-header")
    header.get_by_role("button", name="클러스터 시작").click()
    confirm(page, says="count-run을 시작합니다")
    expect(header.locator("#header-operation")).to_contain_text("단계")
    expect(header.locator("#header-operation")).not_to_contain_text("0/0")
    expect(header.locator("#callout-start-all")).to_be_visible()
    settings.SIMULATOR_STEP_SECONDS = 1.0
    header.locator("#callout-start-all").click()
    confirm(page, says="중지된 멤버 4대를 시작합니다")
    card = page.locator("#operations .op-card").first
    expect(card.locator(".op-outcome")).to_have_text(re.compile(r"진행 [123]/4"))
    expect(card.locator("[data-doing]")).to_contain_text("시작 중")
    expect(header.locator("#header-operation")).to_contain_text("시작 중")
    shoot(page, "start-members-counting")
    running_height = card.bounding_box()["height"]
    expect(card.locator(".op-outcome")).to_have_text("성공 4/4")
    assert (
        abs(page.locator("#operations .op-card").first.bounding_box()["height"] - running_height)
        <= 2
    )
    shoot(page, "start-members-done")
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING


@pytest.mark.parametrize("viewport", WIDTHS, ids=IDS)
def test_after_a_replace_nothing_stale_is_offered(browser_login, page, live_server, viewport):
    """Tasks run eagerly: the 검증 and the 교체 end inside their POST."""
    page.set_viewport_size(viewport)
    cluster = demo_cluster("replace-me", NODES, start=True)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    section = page.locator("#validation-section")
    section.get_by_role("button", name="클러스터 검증").click()
    expect(section).not_to_contain_text("이미 진행 중")
    run = section.locator("article.validation-run").first
    expect(run).to_have_attribute("data-done", "1", timeout=60_000)
    expect(run.locator('[data-verdict-vm="gpu-node-03"]')).to_contain_text("불량")
    run.locator('[data-verdict-vm="gpu-node-03"]').get_by_role("link", name="교체").click()
    page.get_by_label("gpu-reserved-01").check()
    page.locator("#replace-submit").click()
    confirm(page, says="gpu-node-03을 gpu-reserved-01로 교체합니다")
    card = page.locator("#operations .op-card").first
    expect(card.locator(".op-outcome")).to_have_text("교체 완료: gpu-node-03 → gpu-reserved-01")
    done = page.locator("#replace-done")
    expect(done).to_contain_text("gpu-node-03은 이 클러스터에서 분리되었고")
    expect(done).to_contain_text("gpu-reserved-01이 그 자리")
    expect(page.locator("input[name=spare]")).to_have_count(0)
    expect(page.locator("#replace-submit")).to_have_count(0)
    shoot(page, "replace-done")
    page.get_by_role("link", name="정보 탭에서 검증").click()
    latest = page.locator("#validation-section article.validation-run").first
    # The section loads after the tab (hx-get): on a machine busy with guests, past 10 s.
    expect(latest).to_have_attribute("data-older", "1", timeout=60_000)
    expect(latest.locator(".validation-stale")).to_contain_text("분리: gpu-node-03")
    expect(latest.locator(".validation-stale")).to_contain_text("연결(검증 안 됨): gpu-reserved-01")
    expect(latest.locator(".validation-stale")).to_contain_text("클러스터 검증을 다시 실행하세요")
    expect(latest.locator('[data-verdict-vm="gpu-node-03"]')).to_contain_text("지금은 멤버 아님")
    expect(latest.locator('[data-verdict-vm="gpu-node-03"]').get_by_role("link")).to_have_count(0)
    expect(page.locator("#tab-body")).not_to_contain_text("마지막 오류")
    shoot(page, "replace-info")
    page.get_by_role("tab", name="연결된 가상머신").click()
    expect(page.locator('tr[data-vm="gpu-reserved-01"] td.verdict')).to_have_text("검증 안 됨")
    expect(page.locator('tr[data-vm="gpu-node-03"]')).to_have_count(0)
    member = VirtualMachine.objects.get(name="gpu-node-01")
    page.goto(f"{live_server.url}/vms/{member.pk}/")
    panel = page.locator("#metrics-token-panel")
    expect(panel).not_to_contain_text("발급된 토큰이 없습니다")
    expect(panel.locator("#metrics-simulated")).to_contain_text("시뮬레이터")


def test_a_failed_start_reads_in_english_too(
    roce, browser_login, page, live_server, celery_worker, settings
):
    settings.SIMULATOR_STEP_SECONDS = 0.3
    browser_login("admin")
    switch_language(page, "en")
    page.goto(f"{live_server.url}/clusters/{roce.pk}/")
    header = page.locator("#cluster-header")
    header.get_by_role("button", name="Start cluster").click()
    confirm(page)
    outcome = header.locator("#header-outcome")
    expect(outcome).to_contain_text("Start cluster failed")
    expect(outcome).to_contain_text("2 requested, 1 available")
    page.get_by_role("tab", name="Activity").click()
    row = page.locator("#tab-body tr", has_text="It did not start")
    expect(row.locator(".outcome")).to_have_text("Failed")
    shoot(page, "start-failed-activity")
    switch_language(page, "ko")
