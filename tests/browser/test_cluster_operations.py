"""The cluster page as the place a cluster is run, in Chromium, in Korean, with a real
Celery worker: attach three VMs from the empty cluster's 가상머신 연결 panel, start the
cluster, 멤버 모두 시작, 클러스터 중지 with 멤버 가상머신도 함께 중지, then 분리 one member.
Everything happens in one document: progress and statuses arrive by polling.
"""

import pytest
from playwright.sync_api import expect

from clusters.models import ClusterStatus, Operation, VirtualCluster
from tests.browser.dialogs import confirm, confirm_dialog
from tests.browser.test_console import (
    NOT_ELIGIBLE,
    attach,
    demo_cluster,
    mark_document,
    open_vm,
    same_document,
)
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPOT_OR_DR = "스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다"
NODES = ("gpu-node-01", "gpu-node-02", "gpu-node-03")


def member_badge(page, name):
    return page.locator(f"#tab-body tr[data-vm='{name}'] .badge")


def test_run_a_cluster_from_its_page(browser_login, page, live_server, celery_worker, settings):
    settings.SIMULATOR_STEP_SECONDS = 0.3
    cluster = demo_cluster("ops-train")
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    mark_document(page)
    header = page.locator("#cluster-header")
    expect(header.locator("#running-members")).to_have_text("실행중 멤버 0/0")
    expect(header.locator("#callout-empty")).to_be_visible()

    # 1. The empty cluster says so in the header's callout and in the tab, each offering
    # 가상머신 연결; the panel lists the project's VMs.
    expect(header.locator("#callout-empty")).to_contain_text("연결된 가상머신이 없습니다.")
    expect(header.get_by_role("link", name="가상머신 연결")).to_have_count(1)
    empty = page.locator("#members-empty")
    expect(empty).to_contain_text("연결된 가상머신이 없습니다.")
    expect(empty.get_by_role("link", name="가상머신 연결")).to_be_visible()
    header.get_by_role("link", name="가상머신 연결").click()
    dialog = page.locator("#attach-dialog")
    expect(dialog.get_by_role("heading", name="가상머신 연결")).to_be_visible()
    spot = dialog.get_by_label("gpu-spot-01")
    expect(spot).to_be_disabled()
    expect(dialog.locator(".candidate.ineligible", has_text="gpu-spot-01")).to_contain_text(
        SPOT_OR_DR
    )
    for name in NODES:
        dialog.get_by_label(name, exact=True).check()
    dialog.get_by_role("button", name="연결", exact=True).click()

    # 2. One Operation; the dialog closes, the card says 3/3, the tab shows 3 members.
    card = page.locator("#operations .op-card").first
    expect(card).to_contain_text("성공 3/3")
    expect(dialog).not_to_be_visible()
    for name in NODES:
        expect(member_badge(page, name)).to_have_text("중지됨")
    expect(header.locator("#running-members")).to_have_text("실행중 멤버 0/3")

    # 3. Start the cluster; the callout then offers 멤버 모두 시작.
    header.get_by_role("button", name="클러스터 시작").click()
    confirm(page, says="ops-train을 시작합니다")
    expect(header.locator(".badge").first).to_have_text("실행중")
    expect(header.locator("#callout-stopped")).to_contain_text("멤버 3대가 중지되어 있습니다.")

    # 4. 멤버 모두 시작 from the tab: the card counts up, then every member is 실행중.
    page.locator("#tab-body").get_by_role("button", name="멤버 모두 시작").click()
    confirm(page, says="중지된 멤버 3대를 시작합니다")
    start_card = page.locator("#operations .op-card").first
    expect(start_card).to_contain_text("멤버 시작")
    expect(start_card).to_contain_text("성공 3/3")
    # The finished 연결 card gave way to this one (the 활동 tab keeps both).
    expect(page.locator("#operations .op-card")).to_have_count(1)
    for name in NODES:
        expect(member_badge(page, name)).to_have_text("실행중")
    expect(header.locator("#running-members")).to_have_text("실행중 멤버 3/3")
    expect(header.locator("#callout-stopped")).to_have_count(0)

    # 5. 클러스터 중지 with 멤버 가상머신도 함께 중지: members 중지됨, then the cluster 종료됨.
    header.get_by_role("button", name="클러스터 중지").click()
    ok = confirm_dialog(page).locator("#confirm-ok")
    expect(ok).to_be_disabled()  # alone, the seed's rule refuses it
    confirm_dialog(page).get_by_label("멤버 가상머신도 함께 중지").check()
    expect(ok).to_be_enabled()
    confirm(page, says="ops-train을 중지합니다")
    expect(header.locator(".badge").first).to_have_text("종료됨")
    for name in NODES:
        expect(member_badge(page, name)).to_have_text("중지됨")
    assert Operation.objects.filter(kind=Operation.Kind.STOP_CLUSTER).get().done

    # 6. 분리 one member (confirm first), once the tab's refreshes after the stop are in (a
    # click on a row that a refresh replaces meanwhile sends nothing: htmx drops requests of
    # removed elements).
    page.wait_for_load_state("networkidle")
    row = page.locator("#tab-body tr[data-vm='gpu-node-03']")
    row.get_by_role("button", name="gpu-node-03 분리").click()
    confirm(page, says="gpu-node-03을 ops-train에서 분리합니다")
    expect(row).to_have_count(0)
    expect(page.locator(".toasts")).to_contain_text("분리")
    assert VirtualMachine.objects.get(name="gpu-node-03").cluster_id is None
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.TERMINATED
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.STOPPED}

    assert same_document(page)

    # 7. The 활동 tab lists the operations (clicked while the tab's own refresh may still be
    # in flight: its answer is dropped, nothing is aborted, nothing logged).
    page.get_by_role("tab", name="활동").click()
    operations = page.locator("#tab-body .operations-table")
    for label in ("가상머신 연결", "멤버 시작", "클러스터 중지", "가상머신 분리"):
        expect(operations).to_contain_text(label)


def test_vm_cluster_section_offers_only_what_can_succeed(browser_login, page, live_server):
    """After an in-page attach the section offers 클러스터에서 분리 alone, with no cluster
    dropdown left behind (it stayed visible after the HTMX swap); a spot VM's section is
    disabled with the rule's message; the seed's guidance line stays."""
    demo_cluster("section-target")
    browser_login("admin")
    section = attach(page, "gpu-node-01", "section-target")
    expect(section.get_by_role("status")).to_have_text("section-target 클러스터에 연결했습니다.")
    action = section.get_by_label("수행할 작업")
    expect(action.locator("option")).to_have_text(["작업 선택", "클러스터에서 분리"])
    expect(section.get_by_label("연결할 클러스터")).to_have_count(0)
    expect(section).to_contain_text(NOT_ELIGIBLE)

    section = open_vm(page, "gpu-spot-01")
    expect(section.locator("#cluster-obstacle")).to_have_text(SPOT_OR_DR)
    expect(section.get_by_label("수행할 작업")).to_be_disabled()
    expect(section.get_by_role("button", name="저장")).to_be_disabled()
    expect(section).to_contain_text(NOT_ELIGIBLE)


def test_a_refresh_keeps_the_ticked_rows_and_an_action_clears_them(
    browser_login, page, live_server, celery_worker, settings
):
    """While members start one by one the tab redraws on every change: the rows ticked for
    the next action stay ticked, focus stays where it was; the action sent clears them."""
    settings.SIMULATOR_STEP_SECONDS = 0.3
    cluster = demo_cluster("keep-ticks", members=3)
    VirtualCluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    first, second, third = VirtualMachine.objects.filter(cluster=cluster).order_by("name")
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    start = page.locator("#start-selected")
    expect(start).to_be_disabled()
    page.locator(f"#select-{first.pk}").check()
    page.locator(f"#select-{second.pk}").check()
    page.locator(f"#select-{second.pk}").focus()
    expect(start).to_be_enabled()

    # What the header poll does when a member changes: every tab panel reloads.
    page.evaluate(
        "document.getElementById('tab-panel').setAttribute('data-old', '1');"
        "htmx.trigger(document.body, 'cluster-changed')"
    )
    expect(page.locator("#tab-panel:not([data-old])")).to_be_attached()
    expect(page.locator(f"#select-{first.pk}")).to_be_checked()
    expect(page.locator(f"#select-{second.pk}")).to_be_checked()
    expect(page.locator(f"#select-{third.pk}")).not_to_be_checked()
    expect(page.locator(f"#select-{second.pk}")).to_be_focused()
    expect(start).to_be_enabled()

    start.click()
    confirm(page, says="선택한 멤버 2대를 시작합니다")
    expect(page.locator("#operations .op-card").first).to_be_visible()
    expect(page.locator(f"#select-{first.pk}")).not_to_be_checked()
    expect(page.locator(f"#select-{second.pk}")).not_to_be_checked()
    expect(member_badge(page, first.name)).to_have_text("실행중", timeout=20_000)
    expect(member_badge(page, third.name)).to_have_text("중지됨")
    expect(page.locator(f"#select-{first.pk}")).not_to_be_checked()
