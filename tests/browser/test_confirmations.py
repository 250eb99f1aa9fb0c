"""Confirmations say what follows, in Chromium at 1280 and 390 px, in Korean (and English
once): cluster delete names and counts the members it detaches, VM delete says what is lost,
and the stop dialog names the running members before its box is ticked.

``SCREENSHOTS=/some/dir`` saves each open dialog at both widths.
"""

import pytest
from playwright.sync_api import expect

from clusters.models import ClusterStatus, VirtualCluster
from tests.browser.dialogs import cancel, confirm_dialog
from tests.browser.pages import demo_cluster, shoot, switch_language
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 390)
FITS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def open_dialog(page, button):
    button.click()
    dialog = confirm_dialog(page)
    expect(dialog).to_be_visible()
    return dialog


def test_delete_and_stop_dialogs_say_what_follows(browser_login, page, live_server):
    idle = demo_cluster("idle-ib", ["gpu-node-02", "gpu-node-01", "gpu-node-03"])
    busy = demo_cluster("busy-ib", ["gpu-node-04", "gpu-reserved-01"])
    VirtualCluster.objects.filter(pk=busy.pk).update(status=ClusterStatus.RUNNING)
    VirtualMachine.objects.filter(cluster=busy).update(status=VmStatus.RUNNING)
    lone = VirtualMachine.objects.get(name="l40s-node-01")
    browser_login("admin")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/clusters/{idle.pk}/")
        header = page.locator("#cluster-header")
        dialog = open_dialog(page, header.get_by_role("button", name="삭제", exact=True))
        expect(dialog.locator("#confirm-title")).to_have_text("idle-ib를 삭제합니다")
        expect(dialog).to_contain_text(
            "멤버 3대(gpu-node-01, gpu-node-02, gpu-node-03)는 분리되어 일반 가상머신으로 남습니다."
        )
        assert page.evaluate(FITS)
        shoot(page, "delete-cluster-dialog")
        cancel(page)

        page.goto(f"{live_server.url}/vms/{lone.pk}/")
        dialog = open_dialog(page, page.get_by_role("button", name="가상머신 삭제"))
        expect(dialog.locator("#confirm-title")).to_have_text("l40s-node-01을 삭제합니다")
        expect(dialog).to_contain_text("디스크와 사설 IP가 반납되고")
        expect(dialog).to_contain_text("메트릭 기록과 페이지는 더 이상 볼 수 없습니다")
        shoot(page, "delete-vm-dialog")
        cancel(page)

        page.goto(f"{live_server.url}/clusters/{busy.pk}/")
        dialog = open_dialog(page, page.get_by_role("button", name="클러스터 중지"))
        names = dialog.locator("#stop-dialog-members")
        expect(names).to_have_text("실행 중인 멤버 2대: gpu-node-04, gpu-reserved-01")
        expect(dialog.locator("#stop-members-line")).to_be_hidden()
        dialog.get_by_label("멤버 가상머신도 함께 중지").check()
        expect(dialog.locator("#stop-members-line")).to_have_text(
            "멤버 2대를 먼저 중지한 뒤 클러스터를 중지합니다."
        )
        shoot(page, "stop-cluster-dialog")
        cancel(page)

    switch_language(page, "en")
    page.goto(f"{live_server.url}/clusters/{idle.pk}/")
    dialog = open_dialog(page, page.locator("#cluster-header").get_by_role("button", name="Delete"))
    expect(dialog).to_contain_text(
        "The 3 members (gpu-node-01, gpu-node-02, gpu-node-03) are detached and remain "
        "ordinary VMs."
    )
    shoot(page, "delete-cluster-dialog")
    cancel(page)
