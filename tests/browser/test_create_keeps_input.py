"""Forms keep what the user chose, in Chromium at 1280 and 390 px: a name typed while the
zone's redraw is held back by the network stays, and is the name created; the cluster chosen
stays chosen when the zone changes, refused beside its field; 스팟 is not offered beside a
cluster; instance types show what they are.

The redraw is slowed by holding its request until the user has typed (Playwright's route),
so the answer always arrives after the typing, as under load or with 1.5 s of latency.
``SCREENSHOTS=/some/dir`` saves the forms at both widths.
"""

import re

import pytest
from playwright.sync_api import expect

from clusters.models import VirtualCluster
from tests.browser.pages import demo_cluster, shoot
from vms.models import VirtualMachine

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

H100 = "gpu.h100x8 · 8× NVIDIA H100 SXM · 192 vCPU · 2048 GiB"


def settled(page):
    page.wait_for_function("() => !document.querySelector('.htmx-request')")


class HeldRedraws:
    """The form's redraw requests, held until ``release``: each reaches the server only then,
    carrying the values of the moment it left."""

    def __init__(self, page, pattern):
        self.page, self.routes = page, []
        page.route(pattern, self.hold)

    def hold(self, route):
        self.routes.append(route)

    def wait(self):
        """Until a redraw has left the page (and is held)."""
        while not self.routes:
            self.page.wait_for_timeout(20)

    def release(self):
        while self.routes:
            self.routes.pop(0).continue_()
        settled(self.page)


def option_value(select, text):
    option = select.locator("option", has_text=text)
    expect(option).to_have_count(1)
    return option.get_attribute("value")


def test_vm_create_keeps_the_name_typed_during_a_slow_redraw(browser_login, page, live_server):
    browser_login("admin")
    page.goto(f"{live_server.url}/vms/new/")
    held = HeldRedraws(page, re.compile(r".*/vms/new/\?redraw=1.*"))
    zone = page.get_by_label("가용 영역")
    zone.select_option(option_value(zone, "kr-central-1a"))
    held.wait()
    name = page.get_by_label("이름", exact=True)
    name.press_sequentially("typed-during-redraw")
    held.release()
    expect(name).to_have_value("typed-during-redraw")
    kind = page.get_by_label("인스턴스 유형")
    expect(kind.locator("option", has_text=H100)).to_have_count(1)
    kind.select_option(option_value(kind, "gpu.h100x8"))
    held.wait()
    page.get_by_label("개수").fill("1")
    held.release()
    expect(page.get_by_label("개수")).to_have_value("1")
    page.unroute(re.compile(r".*/vms/new/\?redraw=1.*"))
    page.get_by_role("button", name="생성", exact=True).click()
    page.wait_for_url(re.compile(r"/vms/\d+/$"))
    assert VirtualMachine.objects.filter(name="typed-during-redraw").exists()


def test_cluster_create_keeps_the_name_and_the_fabric(browser_login, page, live_server):
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/new/")
    held = HeldRedraws(page, re.compile(r".*/clusters/new/options/.*"))
    zone = page.get_by_label("가용 영역")
    zone.select_option(option_value(zone, "kr-central-1a"))
    held.wait()
    page.get_by_label("클러스터 이름").press_sequentially("typed-cluster")
    held.release()
    kind = page.get_by_label("인스턴스 유형")
    kind.select_option(option_value(kind, H100))
    held.wait()
    held.release()
    fabric = page.get_by_label("패브릭 타입")
    fabric.select_option(option_value(fabric, "InfiniBand"))
    # Another zone offering the same type and fabric: the type and fabric chosen stay.
    zone.select_option(option_value(zone, "kr-central-1b"))
    held.wait()
    held.release()
    expect(page.get_by_label("클러스터 이름")).to_have_value("typed-cluster")
    expect(fabric).to_have_value("INFINIBAND")
    page.unroute(re.compile(r".*/clusters/new/options/.*"))
    page.get_by_role("button", name="생성", exact=True).click()
    page.wait_for_url(re.compile(r"/clusters/\d+/$"))
    assert VirtualCluster.objects.get(name="typed-cluster").zone.code == "kr-central-1b"


def test_the_cluster_chosen_stays_and_spot_is_not_offered(browser_login, page, live_server):
    cluster = demo_cluster("ib-train")
    browser_login("admin")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/vms/new/")
        zone, kind = page.get_by_label("가용 영역"), page.get_by_label("인스턴스 유형")
        notes = page.locator("#cluster-notes")
        expect(notes).to_have_text(
            "가용 영역과 인스턴스 유형을 고르면 연결할 수 있는 클러스터가 보입니다."
        )
        zone.select_option(option_value(zone, "kr-central-1a"))
        settled(page)
        kind.select_option(option_value(kind, "gpu.h100x8"))
        settled(page)
        expect(notes).to_contain_text("선택한 영역·인스턴스 유형의 클러스터만 보입니다.")
        clusters = page.get_by_label("생성 후 클러스터에 연결")
        clusters.select_option(str(cluster.pk))
        settled(page)
        billing = page.get_by_label("과금 유형")
        expect(billing.locator("option[value=SPOT]")).to_be_disabled()
        zone.select_option(option_value(zone, "kr-central-1b"))
        settled(page)
        expect(clusters).to_have_value(str(cluster.pk))  # kept, not silently dropped
        expect(page.locator("#cluster-refusal")).to_have_text(
            "다른 가용 영역(kr-central-1b)의 가상머신은 이 클러스터에 연결할 수 없습니다"
        )
        assert page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        shoot(page, "vm-create-cluster-refused")
