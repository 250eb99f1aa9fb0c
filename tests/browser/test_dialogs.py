"""Confirmations, progress and refusals in Chromium, in Korean (then English for the
pictures): the stop dialog says what it stops and the header follows the operation; VM
create refuses a spot VM for a cluster and creates nothing; the 가상머신 연결 dialog says per
VM what refuses it; a failed item is worded and coloured as a failure, the finished card
gives way to the next, and toasts stay clear of the row actions.

Pictures of each dialog at 1280 and 390 px go to ``/tmp/h-dialog`` (``CONSOLE_SHOTS``).
"""

import threading

import pytest
from playwright.sync_api import expect

from clusters.models import ClusterStatus, Operation, VirtualCluster
from portal.catalog.models import InstanceType, Zone
from portal.compute.backends.simulator import SimulatorBackend
from portal.foundation import errors
from tests.browser.dialogs import cancel, confirm, confirm_dialog, shoot, switch_language
from tests.browser.test_console import demo_cluster
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPOT_OR_DR = "스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다"
STILL_RUNNING = "실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다"
MEMBERS = ("gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04")


def running_cluster(name, members=4, member_status=VmStatus.RUNNING):
    cluster = demo_cluster(name, members=members)
    VirtualCluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    VirtualMachine.objects.filter(cluster=cluster).update(status=member_status)
    return cluster


def settled(page):
    """htmx has no request in flight (it marks the element that sent one)."""
    page.wait_for_function("() => !document.querySelector('.htmx-request')")


def member_badge(page, name):
    return page.locator(f"#tab-body tr[data-vm='{name}'] .badge")


def test_stopping_a_cluster_says_what_it_stops_and_the_header_follows_it(
    browser_login, page, live_server, celery_worker
):
    cluster = running_cluster("ib-demo")
    # The first member's stop waits until the test has seen the header mid-operation.
    release = threading.Event()
    SimulatorBackend.hooks["stop_vm"] = lambda: release.wait(30)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    header = page.locator("#cluster-header")
    stop = header.get_by_role("button", name="클러스터 중지")
    expect(stop).to_be_enabled()
    expect(header.locator("#stop-reason")).to_have_count(0)  # said in the dialog instead

    stop.click()
    dialog = confirm_dialog(page)
    expect(dialog.locator("#confirm-title")).to_have_text("ib-demo를 중지합니다")
    expect(dialog).to_contain_text(STILL_RUNNING)
    # Which members run is said before the box is ticked.
    expect(dialog.locator("#stop-dialog-members")).to_have_text(
        "실행 중인 멤버 4대: gpu-node-01, gpu-node-02, gpu-node-03, gpu-node-04"
    )
    ok = dialog.locator("#confirm-ok")
    expect(ok).to_have_text("클러스터 중지")
    expect(ok).to_be_disabled()  # alone, the seed's rule refuses it
    line = dialog.locator("#stop-members-line")
    expect(line).to_be_hidden()
    dialog.get_by_label("멤버 가상머신도 함께 중지").check()
    expect(line).to_have_text("멤버 4대를 먼저 중지한 뒤 클러스터를 중지합니다.")
    expect(ok).to_be_enabled()
    assert "을(를)" not in dialog.inner_text()
    shoot(page, "stop-dialog-ko")
    cancel(page)

    switch_language(page, "English")
    page.locator("#cluster-header").get_by_role("button", name="Stop cluster").click()
    dialog.get_by_role("checkbox").check()
    expect(dialog.locator("#stop-members-line")).to_be_visible()
    shoot(page, "stop-dialog-en")
    cancel(page)
    switch_language(page, "한국어")

    header.get_by_role("button", name="클러스터 중지").click()
    dialog.get_by_label("멤버 가상머신도 함께 중지").check()
    confirm(page, says="ib-demo를 중지합니다")

    # Mid-operation: the header names it and offers no contradicting action.
    busy = header.locator("#header-operation")
    expect(busy).to_contain_text("클러스터 중지 진행 중")
    expect(header.get_by_role("button", name="클러스터 중지")).to_have_count(0)
    expect(page.get_by_role("button", name="멤버 모두 시작")).to_have_count(0)
    expect(page.locator("#members-busy")).to_be_visible()
    shoot(page, "stop-in-progress-ko")
    release.set()

    expect(header.locator(".badge").first).to_have_text("종료됨")
    for name in MEMBERS:
        expect(member_badge(page, name)).to_have_text("중지됨")
    expect(busy).to_have_count(0)
    card = page.locator("#operations .op-card").first
    expect(card).to_contain_text("성공 4/4")
    assert Operation.objects.get(kind=Operation.Kind.STOP_CLUSTER).done


def refresh_under_the_dialog(page, part="#cluster-header"):
    """What the header's poll does every 2 s: the header, and on a change the tab, fetched
    and swapped whole under the open dialog. Waits until ``part``, where the asking form
    was, has been drawn anew."""
    page.evaluate(f"document.querySelector('{part}').setAttribute('data-old', '')")
    page.evaluate("htmx.trigger(document.body, 'cluster-changed')")
    expect(page.locator(f"{part}[data-old]")).to_have_count(0)
    settled(page)


def test_a_confirmation_outlives_the_header_swapped_under_it(browser_login, page, live_server):
    """A tired operator reads the stop dialog for longer than the header's 2 s poll: 확인
    still stops the cluster (htmx drops a request from the replaced form)."""
    cluster = running_cluster("ib-slow", members=2, member_status=VmStatus.STOPPED)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    page.locator("#cluster-header").get_by_role("button", name="클러스터 중지").click()
    expect(confirm_dialog(page)).to_be_visible()
    refresh_under_the_dialog(page)

    confirm(page, "ib-slow를 중지합니다")
    expect(page.locator("#cluster-header .badge")).to_have_text("종료됨")
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.TERMINATED
    # Asked once, sent once.
    assert Operation.objects.filter(cluster=cluster, kind=Operation.Kind.STOP_CLUSTER).count() == 1


def test_a_bulk_confirmation_outlives_the_tab_drawn_anew_under_it(
    browser_login, page, live_server, celery_worker
):
    """멤버 모두 중지's form has no id: the tab drawn anew offers the same action with the
    same question, and 확인 goes to it."""
    cluster = running_cluster("ib-bulk", members=2)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    page.locator("#stop-all").click()
    expect(confirm_dialog(page)).to_be_visible()
    refresh_under_the_dialog(page, "#tab-panel")

    confirm(page, "실행 중인 멤버 2대를 중지합니다")
    for name in MEMBERS[:2]:
        expect(member_badge(page, name)).to_have_text("중지됨")


def test_a_confirmation_whose_action_left_the_page_says_so_and_sends_nothing(
    browser_login, page, live_server
):
    """Another operator stopped the cluster while this one's stop dialog was open: 확인 is
    no longer offered, the dialog says why, and nothing is sent."""
    cluster = running_cluster("ib-twice", members=2, member_status=VmStatus.STOPPED)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    page.locator("#cluster-header").get_by_role("button", name="클러스터 중지").click()
    dialog = confirm_dialog(page)
    expect(dialog).to_be_visible()
    VirtualCluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.TERMINATED)
    refresh_under_the_dialog(page)

    dialog.locator("#confirm-ok").click()
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("alert")).to_have_text(
        "화면이 바뀌었습니다. 바뀐 화면을 확인하고 다시 시도하세요."
    )
    expect(dialog.locator("#confirm-ok")).to_be_disabled()
    shoot(page, "page-changed-dialog-ko")
    cancel(page)
    expect(page.locator("#cluster-header .badge")).to_have_text("종료됨")
    assert not Operation.objects.filter(cluster=cluster).exists()


def test_vm_create_refuses_a_spot_vm_for_a_cluster_and_creates_nothing(
    browser_login, page, live_server
):
    demo_cluster("ib-demo")
    other = demo_cluster("b-cluster")
    VirtualCluster.objects.filter(pk=other.pk).update(zone=Zone.objects.get(code="kr-central-1b"))
    browser_login("admin")
    page.goto(f"{live_server.url}/vms/")
    page.locator("a[hx-target='#create-panel']", has_text="가상머신 생성").click()
    form = page.locator("#create-form")
    expect(form).to_contain_text("클러스터에 추가할 가상머신은 같은 영역·같은 인스턴스 유형으로")
    form.get_by_label("이름").fill("spot-batch")
    form.get_by_label("가용 영역").select_option(label="kr-central-1a")
    settled(page)
    clusters = form.get_by_label("생성 후 클러스터에 연결")
    # The cluster list narrows with the zone, as cluster create's types do.
    expect(clusters.locator("option", has_text="b-cluster")).to_have_count(0)
    form.get_by_label("인스턴스 유형").select_option(
        form.locator("#id_instance_type option", has_text="gpu.h100x8").get_attribute("value")
    )
    settled(page)  # the fields are drawn again for the type: fill them after that
    expect(clusters.locator("option", has_text="ib-demo")).to_have_count(1)
    form.get_by_label("과금 유형").select_option(label="스팟")
    form.get_by_label("개수").fill("2")
    clusters.select_option(label="ib-demo (kr-central-1a · gpu.h100x8)")
    form.get_by_role("button", name="생성").click()

    refused = page.locator("#cluster-notes")  # beside the cluster it refuses
    expect(refused).to_contain_text(SPOT_OR_DR)
    assert not VirtualMachine.objects.filter(name__startswith="spot-batch").exists()
    assert not Operation.objects.filter(kind=Operation.Kind.CREATE_VMS).exists()
    shoot(page, "vm-create-refused-ko")
    switch_language(page, "English")
    page.locator("a[hx-target='#create-panel']").click()
    expect(page.locator("#create-form")).to_be_visible()
    shoot(page, "vm-create-en")


def test_the_attach_dialog_says_per_vm_what_refuses_it(browser_login, page, live_server):
    cluster = demo_cluster("ib-demo")
    # Enough VMs for the list to scroll: 연결 must stay in view.
    zone = Zone.objects.get(code="kr-central-1a")
    h100 = InstanceType.objects.get(code="gpu.h100x8")
    for i in range(1, 25):
        VirtualMachine.objects.create(
            project=cluster.project,
            name=f"gpu-extra-{i:02d}",
            zone=zone,
            instance_type=h100,
            billing_type="ON_DEMAND",
            status=VmStatus.STOPPED,
        )
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    page.locator("#callout-attach").click()
    dialog = page.locator("#attach-dialog")
    expect(dialog.get_by_role("heading", name="가상머신 연결")).to_be_visible()

    def reason(name):
        return dialog.locator(f"[data-candidate='{name}'] .candidate-reason")

    expect(reason("gpu-b-node-01")).to_have_text("다른 가용 영역 (kr-central-1b)")
    expect(reason("gpu-running-01")).to_have_text("실행중 — 먼저 중지하세요")
    expect(reason("l40s-node-01")).to_have_text("인스턴스 유형이 다름 (gpu.l40sx4)")
    expect(reason("gpu-spot-01")).to_have_text(SPOT_OR_DR)
    expect(reason("gpu-dr-01")).to_have_text(SPOT_OR_DR)

    submit = dialog.get_by_role("button", name="연결", exact=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        expect(submit).to_be_in_viewport()
    page.set_viewport_size({"width": 1280, "height": 900})

    search = dialog.get_by_placeholder("가상머신 이름으로 찾기")
    search.fill("gpu-node")
    expect(dialog.locator("[data-candidate]:visible")).to_have_count(4)
    expect(dialog.locator("[data-candidate='gpu-extra-01']")).to_be_hidden()
    shoot(page, "attach-dialog-search-ko")
    search.fill("-01")  # one of each kind, the refused ones with their reasons
    expect(dialog.locator("[data-candidate]:visible")).to_have_count(8)
    shoot(page, "attach-dialog-reasons-ko")
    search.fill("")
    shoot(page, "attach-dialog-ko")
    dialog.get_by_label("gpu-node-01", exact=True).check()
    dialog.get_by_label("gpu-node-02", exact=True).check()
    submit.click()
    expect(page.locator("#operations .op-card").first).to_contain_text("성공 2/2")
    assert cluster.members.count() == 2

    switch_language(page, "English")
    page.locator("#open-attach").click()
    expect(page.locator("#attach-dialog")).to_contain_text("Another availability zone")
    page.locator("#attach-search").fill("-01")
    shoot(page, "attach-dialog-en")


def test_validation_disabled_says_why_with_start_all_beside_it(browser_login, page, live_server):
    cluster = running_cluster("ib-demo", member_status=VmStatus.STOPPED)
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    section = page.locator("#validation-section")
    expect(section.get_by_role("button", name="클러스터 검증")).to_be_disabled()
    expect(section.locator("#validate-reason")).to_have_text("실행중인 멤버가 2대 이상 필요합니다")
    expect(section.get_by_role("button", name="멤버 모두 시작")).to_be_visible()
    shoot(page, "validation-disabled-ko")
    idle = demo_cluster("idle-demo")
    page.goto(f"{live_server.url}/clusters/{idle.pk}/")
    expect(page.locator("#validate-reason")).to_have_text(
        "클러스터가 실행중일 때 검증할 수 있습니다. 먼저 클러스터를 시작하세요"
    )


def test_a_failed_start_is_worded_and_coloured_as_failure_and_cards_do_not_stack(
    browser_login, page, live_server, celery_worker
):
    cluster = running_cluster("ib-demo", member_status=VmStatus.STOPPED)
    SimulatorBackend.faults["start_vm"] = errors.BackendError
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    first = VirtualMachine.objects.get(name="gpu-node-01")
    page.locator(f"#select-{first.pk}").check()
    page.locator("#start-selected").click()
    confirm(page, says="선택한 멤버 1대를 시작합니다")

    card = page.locator("#operations .op-card").first
    expect(card).to_have_attribute("data-outcome", "failed")
    expect(card.locator(".op-outcome")).to_have_text("실패 1")
    expect(card).to_contain_text("컴퓨트 백엔드 오류로 작업을 완료하지 못했습니다")
    toast = page.locator(".toasts .toast").first
    expect(toast).to_contain_text("실패 1")
    expect(toast).not_to_contain_text("성공")
    # The toast covers no row action, on a desktop or a phone.
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        box = toast.bounding_box()
        for action in page.locator("#tab-body td.row-actions").all():
            other = action.bounding_box()
            if box is None or other is None:
                continue
            apart = (
                box["x"] + box["width"] <= other["x"]
                or other["x"] + other["width"] <= box["x"]
                or box["y"] + box["height"] <= other["y"]
                or other["y"] + other["height"] <= box["y"]
            )
            assert apart, f"the toast covers a row's actions at {width} px"
    shoot(page, "failed-card-ko")
    page.set_viewport_size({"width": 1280, "height": 900})

    # The next action: the finished card gives way (the 활동 tab keeps both).
    page.locator("#tab-body").get_by_role("button", name="멤버 모두 시작").click()
    confirm(page, says="중지된 멤버 4대를 시작합니다")
    expect(page.locator("#operations .op-card").first).to_contain_text("성공 4/4")
    expect(page.locator("#operations .op-card")).to_have_count(1)
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/activity/")
    rows = page.locator(".operations-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_have_attribute("data-outcome", "failed")
    expect(rows.nth(1)).to_contain_text("실패 1")
    expect(rows.nth(0)).to_contain_text("성공 4/4")


def test_revoking_an_api_token_is_confirmed_in_the_same_dialog(browser_login, page, live_server):
    """A plain form (no htmx) asks through data-confirm: 취소 sends nothing, 폐기 sends it."""
    browser_login("admin")
    page.goto(f"{live_server.url}/account/api-tokens/")
    page.get_by_label("이름").fill("ci")
    page.get_by_role("button", name="발급").click()
    row = page.locator("tr[data-token-name='ci']")
    expect(row).to_contain_text("사용 가능")
    row.get_by_role("button", name="폐기").click()
    dialog = confirm_dialog(page)
    expect(dialog.locator("#confirm-title")).to_have_text("ci 토큰을 폐기합니다")
    shoot(page, "token-revoke-ko")
    cancel(page)
    expect(row).to_contain_text("사용 가능")
    row.get_by_role("button", name="폐기").click()
    confirm(page, says="ci 토큰을 폐기합니다")
    expect(page.locator("tr[data-token-name='ci']")).to_contain_text("폐기됨")
