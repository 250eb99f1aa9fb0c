"""The lists on a phone and the admin, in Chromium at 390 and 1280 px: the VM and cluster
lists are cards whose every value is whole (a zone is never cut off, nothing scrolls
sideways); 검증's and 교체's boxes are the console's; the admin counts in Korean word order,
shows no "None" and writes dates as the console does.

``SCREENSHOTS=/some/dir`` saves each page at both widths.
"""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tests.browser.pages import demo_cluster, shoot
from vms.models import VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
# Cells whose text is cut off (wider than the cell) or reach past the screen's edge.
CUT = """
(selector) => [...document.querySelectorAll(selector)].filter((cell) => {
  const r = cell.getBoundingClientRect();
  const edge = document.documentElement.clientWidth + 0.5;
  return cell.scrollWidth > cell.clientWidth + 1 || r.right > edge;
}).map((cell) => cell.textContent.trim())
"""


def test_lists_are_whole_cards_on_a_phone(browser_login, page, live_server):
    cluster = demo_cluster("llm-pretrain-h100", ["gpu-node-01", "gpu-node-02"])
    member = VirtualMachine.objects.get(name="gpu-node-01")
    browser_login("admin")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/vms/")
        row = page.locator("tr[data-vm='gpu-node-01']")
        expect(row.get_by_text("kr-central-1a", exact=True)).to_be_visible()
        assert page.evaluate(CUT, "#vm-table td") == []
        assert page.evaluate(FITS), f"the VM list scrolls sideways at {width} px"
        shoot(page, "vm-list")
        page.goto(f"{live_server.url}/clusters/")
        row = page.locator("#cluster-table tbody tr").first
        expect(row.get_by_role("link", name="llm-pretrain-h100")).to_be_visible()
        expect(row.get_by_text("kr-central-1a", exact=True)).to_be_visible()
        assert page.evaluate(CUT, "#cluster-table td") == []
        assert page.evaluate(FITS), f"the cluster list scrolls sideways at {width} px"
        if width == 390:  # a card: each value with its column's name
            zone = row.locator("td[data-label]", has_text="kr-central-1a")
            label = zone.evaluate("(td) => getComputedStyle(td, '::before').content")
            assert "가용 영역" in label
        shoot(page, "cluster-list")
        page.goto(f"{live_server.url}/clusters/{cluster.pk}/replace/?member={member.pk}")
        box = page.locator("#replace-form fieldset")
        style = box.evaluate("(f) => getComputedStyle(f).borderTopStyle")
        assert style == "solid"  # the console's box, not the browser's groove
        shoot(page, "replace-page")


def test_the_admin_in_korean_word_order_and_console_dates(page, live_server, demo):
    demo_cluster("llm-pretrain-h100", ["gpu-node-01", "gpu-node-02"])
    get_user_model().objects.filter(username="root").update(is_staff=True)
    root = get_user_model().objects.get(username="root")
    root.set_password(demo.password)
    root.save()
    page.goto(f"{live_server.url}/admin/login/")
    page.locator("#id_username").fill("root")
    page.locator("#id_password").fill(demo.password)
    page.locator("input[type=submit]").click()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/admin/clusters/virtualcluster/")
        expect(page.locator(".paginator")).to_contain_text("가상 클러스터 1개")
        created = page.locator("#result_list td.field-created_at").first
        expect(created).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d$"))
        name = page.locator("#result_list th.field-name").first
        assert name.evaluate("(th) => th.getClientRects().length") == 1  # one line, not broken
        shoot(page, "admin-clusters")
        page.locator("#result_list th.field-name a").first.click()
        expect(page.locator("div.field-last_error_message .readonly")).to_have_text("-")
        expect(page.locator("#content")).not_to_contain_text("None")
        shoot(page, "admin-cluster")
