"""Reasons instead of silence, in Chromium at 1280 and 390 px: a viewer sees the actions that
exist, disabled, each with why ("권한 없음: …"); the 교체 page reached by its URL says the
permission is missing, not that there is no spare; the empty members tab says it is empty
and offers 가상머신 연결 itself. In English once.

``SCREENSHOTS=/some/dir`` saves each page at both widths.
"""

import pytest
from playwright.sync_api import expect

from tests.browser.pages import demo_cluster, shoot, switch_language
from vms.models import VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 390)
FITS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
NO_UPDATE = "권한 없음: Resource.VirtualCluster.UPDATE"
NO_DELETE = "권한 없음: Resource.VirtualCluster.DELETE"
NO_VM_UPDATE = "권한 없음: Resource.VirtualMachine.UPDATE"


def described(page, button):
    """The text of what a disabled button names as its reason (what a screen reader reads)."""
    expect(button).to_be_disabled()
    reason = page.locator(f"#{button.get_attribute('aria-describedby')}")
    expect(reason).to_be_visible()
    return reason.inner_text()


def test_a_viewer_sees_each_action_disabled_with_why(browser_login, page, live_server):
    cluster = demo_cluster("view-only", ["gpu-node-01", "gpu-node-02"])
    empty = demo_cluster("empty-one")
    member = VirtualMachine.objects.get(name="gpu-node-01")
    browser_login("viewer")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/clusters/")
        create = page.get_by_role("button", name="가상 클러스터 생성")
        assert described(page, create) == "권한 없음: Resource.VirtualCluster.CREATE"
        assert page.evaluate(FITS)
        shoot(page, "viewer-list")

        page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
        header = page.locator("#cluster-header")
        assert described(page, header.get_by_role("button", name="클러스터 시작")) == NO_UPDATE
        assert described(page, header.get_by_role("button", name="삭제")) == NO_DELETE
        assert described(page, page.get_by_role("button", name="이름 변경")) == NO_UPDATE
        assert described(page, page.get_by_role("button", name="클러스터 검증")) == NO_UPDATE
        assert page.evaluate(FITS)
        shoot(page, "viewer-cluster")

        page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
        tab = page.locator("#tab-body")
        assert described(page, tab.get_by_role("button", name="가상머신 연결")) == NO_VM_UPDATE
        assert described(page, tab.get_by_role("button", name="멤버 모두 시작")) == NO_VM_UPDATE
        assert page.evaluate(FITS)
        shoot(page, "viewer-members")

        page.goto(f"{live_server.url}/clusters/{empty.pk}/vms/")
        box = page.locator("#members-empty")
        expect(box).to_contain_text("연결된 가상머신이 없습니다.")
        assert described(page, box.get_by_role("button", name="가상머신 연결")) == NO_VM_UPDATE

        page.goto(f"{live_server.url}/clusters/{cluster.pk}/replace/?member={member.pk}")
        expect(page.get_by_text("연결할 수 있는 예비 가상머신이 없습니다")).to_have_count(0)
        assert described(page, page.get_by_role("button", name="교체")) == NO_VM_UPDATE
        assert page.evaluate(FITS)
        shoot(page, "viewer-replace")

    switch_language(page, "en")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    start = page.locator("#cluster-header").get_by_role("button", name="Start cluster")
    assert described(page, start) == "No permission: Resource.VirtualCluster.UPDATE"
    shoot(page, "viewer-cluster")


def test_the_empty_members_tab_offers_attach_itself(browser_login, page, live_server):
    empty = demo_cluster("empty-one")
    browser_login("admin")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/clusters/{empty.pk}/vms/")
        box = page.locator("#members-empty")
        expect(box).to_contain_text("연결된 가상머신이 없습니다.")
        shoot(page, "members-empty")
        box.get_by_role("link", name="가상머신 연결").click()
        dialog = page.locator("#attach-dialog")
        expect(dialog.get_by_role("heading", name="가상머신 연결")).to_be_visible()
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
