"""Mobile and keyboard use of the console in Chromium.

At 390 px no page scrolls sideways and every row's action button is on screen without
scrolling the table; the tabs follow the ARIA tabs pattern with the arrow keys; the create
panel takes the focus and gives it back on Esc; status changes reach the live region; and
the tab last clicked is the one shown, however fast the clicks and whichever answer is late.

``SCREENSHOTS=/some/dir`` saves each page at 1280 and 390 px, in Korean and English.
"""

import re
import threading
import time

import pytest
from playwright.sync_api import expect

import clusters.views.clusters
from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType, InstanceType, Zone
from portal.models import Project
from tests.browser.conftest import script_errors
from tests.browser.dialogs import confirm
from tests.browser.pages import shoot, switch_language
from tests.waiting import wait_until
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def running_cluster(members=2):
    """A 실행중 cluster with members (its Info tab then shows the fabric snippets)."""
    cluster = VirtualCluster.objects.create(
        project=Project.objects.get(slug="demo"),
        name="llm-pretrain-h100",
        zone=Zone.objects.get(code="kr-central-1a"),
        instance_type=InstanceType.objects.get(code="gpu.h100x8"),
        fabric_type=FabricType.INFINIBAND,
        status=ClusterStatus.RUNNING,
    )
    nodes = VirtualMachine.objects.filter(name__startswith="gpu-node-").order_by("name")
    for i, vm in enumerate(nodes[:members]):
        vm.cluster = cluster
        vm.private_ip = f"10.10.0.{i + 11}"
        vm.status = VmStatus.RUNNING if i == 0 else VmStatus.STOPPED
        vm.save(update_fields=["cluster", "private_ip", "status"])
    return cluster


def console_pages(cluster):
    vm = VirtualMachine.objects.get(name="gpu-node-01")
    return {
        "cluster-list": "/clusters/",
        "cluster-new": "/clusters/new/",
        "cluster-info": f"/clusters/{cluster.pk}/",
        "cluster-members": f"/clusters/{cluster.pk}/vms/",
        "cluster-metrics": f"/clusters/{cluster.pk}/metrics/",
        "cluster-activity": f"/clusters/{cluster.pk}/activity/",
        "vm-list": "/vms/",
        "vm-new": "/vms/new/",
        "vm-edit": f"/vms/{vm.pk}/",
    }


@pytest.fixture
def page(context):
    """conftest's page, on this module's context: no script or console error. The fast tab
    clicks abort nothing (which htmx would log as errors): older answers are dropped."""
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors = script_errors(page)
    yield page
    assert errors == [], "the page logged errors"
    page.close()


def overflow(page) -> int:
    """How far the page scrolls sideways (0 = not at all)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


# Each row button: bring its row into view vertically only (scrolling it into view would
# also scroll the table sideways and hide the fault), then ask whether it is on screen and
# is what a tap at its centre would hit.
ROW_BUTTONS_ON_SCREEN = """
(buttons) => buttons.map((button) => {
  const top = button.getBoundingClientRect().top + window.scrollY;
  window.scrollTo(0, Math.max(0, top - window.innerHeight / 2));
  const r = button.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {
    name: button.getAttribute("aria-label") || button.textContent.trim(),
    onScreen: r.left >= 0 && r.right <= window.innerWidth && r.width > 0,
    tappable: !!hit && button.contains(hit),
  };
})
"""


# The gaps between a row's buttons side by side (시작, then 분리), in px.
ROW_BUTTON_GAPS = """
cells => cells.flatMap(cell => {
  const rects = [...cell.querySelectorAll("button")].map(b => b.getBoundingClientRect());
  const gaps = [];
  for (let i = 1; i < rects.length; i++) {
    const [left, right] = [rects[i - 1], rects[i]];
    if (Math.abs(right.top - left.top) < 4) gaps.push(right.left - left.right);
  }
  return gaps;
})
"""


@pytest.mark.parametrize("language", ["ko", "en"])
def test_no_page_overflows_at_390_px_and_row_actions_stay_visible(
    browser_login, page, live_server, language
):
    cluster = running_cluster()
    browser_login("admin")
    if language == "en":
        switch_language(page, "en")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        for name, url in console_pages(cluster).items():
            page.goto(live_server.url + url)
            if name == "cluster-metrics":
                expect(page.locator("#metrics-charts .muted")).to_have_count(0)
            shoot(page, name)
            if viewport is PHONE:
                assert overflow(page) <= 0, f"{name} scrolls sideways at 390 px"
            buttons = page.locator("td.row-actions button")
            if name in ("vm-list", "cluster-members"):
                assert buttons.count() >= 2, name
            if name == "cluster-members":  # a stopped member's row: 시작, then 분리
                gaps = page.locator("td.row-actions").evaluate_all(ROW_BUTTON_GAPS)
                assert gaps and min(gaps) >= 4, f"a row's buttons touch: {gaps}"
            if viewport is PHONE and buttons.count():
                hidden = [
                    b
                    for b in buttons.evaluate_all(ROW_BUTTONS_ON_SCREEN)
                    if not (b["onScreen"] and b["tappable"])
                ]
                assert hidden == [], f"{name}: row actions off screen at 390 px"
        # the create panels open inside the lists
        for url in ("/clusters/", "/vms/"):
            page.goto(live_server.url + url)
            page.locator(".page-header .btn-primary").click()
            expect(page.locator("#create-panel form")).to_be_visible()
            shoot(page, url.strip("/") + "-panel")
            if viewport is PHONE:
                assert overflow(page) <= 0, f"{url} with its create panel scrolls sideways"
    page.context.clear_cookies()
    page.goto(live_server.url + "/login/")
    shoot(page, "login")
    assert overflow(page) <= 0


def test_tabs_move_with_the_arrow_keys_and_open_with_enter_or_space(
    browser_login, page, live_server
):
    cluster = running_cluster()
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    tabs = page.get_by_role("tab")
    expect(tabs).to_have_count(4)
    names = ["정보", "연결된 가상머신", "메트릭", "활동"]
    # Only the selected tab is in the Tab order.
    assert [t.get_attribute("tabindex") for t in tabs.all()] == ["0", "-1", "-1", "-1"]
    page.get_by_role("tab", name="정보").focus()
    for key, expected in (
        ("ArrowRight", "연결된 가상머신"),
        ("ArrowRight", "메트릭"),
        ("ArrowLeft", "연결된 가상머신"),
        ("End", "활동"),
        ("ArrowRight", "정보"),  # wraps around
        ("ArrowLeft", "활동"),
        ("Home", "정보"),
    ):
        page.keyboard.press(key)
        focused = page.get_by_role("tab", name=expected, exact=True)
        expect(focused).to_be_focused()
        expect(focused).to_have_attribute("tabindex", "0")
        others = [n for n in names if n != expected]
        for other in others:
            expect(page.get_by_role("tab", name=other, exact=True)).to_have_attribute(
                "tabindex", "-1"
            )
    # The arrows only move the focus; Enter opens the tab, and the keyboard stays on it.
    expect(page.locator("#tab-panel")).to_have_attribute("data-tab", "info")
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    expect(page.locator("#tab-panel")).to_have_attribute("data-tab", "activity")
    expect(page).to_have_url(re.compile(rf"/clusters/{cluster.pk}/activity/$"))
    expect(page.get_by_role("tab", name="활동")).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(page.get_by_role("tab", name="메트릭")).to_be_focused()
    page.keyboard.press("Space")
    expect(page.locator("#tab-panel")).to_have_attribute("data-tab", "metrics")
    expect(page.get_by_role("tab", name="메트릭")).to_be_focused()
    expect(page.get_by_role("tab", name="메트릭")).to_have_attribute("aria-selected", "true")


def test_a_tab_swapped_in_answers_at_once(browser_login, page, live_server):
    """New tabs are live the moment they are on screen: a click in the first task after the
    panel is swapped is an htmx request, not a page load that loses the keyboard's place.

    (htmx wires swapped-in content when it settles, after its settle delay; a Space pressed
    in between followed the link as a plain page load.)
    """
    cluster = running_cluster()
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    page.evaluate(
        """() => {
          window.samePage = true;
          document.addEventListener("htmx:afterSwap", () => {
            const panel = document.getElementById("tab-panel");
            if (window.clicked || !panel || panel.dataset.tab !== "activity") return;
            window.clicked = true;
            setTimeout(() => document.getElementById("tab-metrics").click(), 0);
          });
        }"""
    )
    page.get_by_role("tab", name="활동").click()
    expect(page.locator("#tab-panel")).to_have_attribute("data-tab", "metrics")
    expect(page).to_have_url(re.compile(rf"/clusters/{cluster.pk}/metrics/$"))
    assert page.evaluate("() => window.samePage === true"), "the click loaded a new page"


@pytest.mark.parametrize(
    ("url", "opener", "first_field"),
    [
        ("/clusters/", "가상 클러스터 생성", "클러스터 이름"),
        ("/vms/", "가상머신 생성", "이름"),
    ],
)
def test_create_panel_takes_the_focus_and_esc_closes_it(
    browser_login, page, live_server, url, opener, first_field
):
    browser_login("admin")
    page.goto(live_server.url + url)
    button = page.locator("a[hx-target='#create-panel']", has_text=opener)
    button.click()
    panel = page.locator("#create-panel")
    field = panel.locator("#id_name")
    expect(field).to_be_focused()
    expect(panel.get_by_label(re.compile(f"^{first_field}"))).to_be_focused()
    field.fill("typed-then-escaped")
    page.keyboard.press("Tab")
    page.keyboard.press("Escape")
    expect(panel.locator("form")).to_have_count(0)
    expect(button).to_be_focused()  # back where the user was
    # Opened again from the keyboard, it focuses its first field again.
    page.keyboard.press("Enter")
    expect(panel.locator("#id_name")).to_be_focused()


def test_cluster_form_keeps_the_focus_when_its_fields_are_redrawn(browser_login, page, live_server):
    browser_login("admin")
    page.locator("a[hx-target='#create-panel']", has_text="가상 클러스터 생성").click()
    form = page.locator("#create-form")
    expect(form.locator("#id_name")).to_be_focused()  # the panel has settled
    zone = form.get_by_label("가용 영역")
    zone.focus()  # a keyboard user picks the zone with the arrow keys
    page.keyboard.press("ArrowDown")
    expect(zone).to_have_value(re.compile(r"\d+"))
    expect(form.get_by_label("인스턴스 유형").locator("option")).not_to_have_count(1)
    expect(form.get_by_label("가용 영역")).to_be_focused()


def test_status_changes_are_announced_in_the_live_region(
    browser_login, page, live_server, celery_worker, settings
):
    settings.SIMULATOR_STEP_SECONDS = 0.5
    browser_login("admin")
    page.goto(f"{live_server.url}/vms/")
    live = page.locator("#live-status")
    expect(live).to_have_attribute("aria-live", "polite")
    row = page.locator("tr[data-vm='gpu-node-03']")
    row.get_by_role("button", name="gpu-node-03 시작").click()
    confirm(page, says="gpu-node-03을 시작합니다")
    expect(row.locator(".badge")).to_have_text("실행중")
    expect(live).to_have_text("gpu-node-03 상태: 실행중")


class SlowTabs(dict):
    """Seconds per tab the server waits before answering it, and the answers it is making."""

    def __init__(self):
        super().__init__()
        self.making = 0
        self.lock = threading.Lock()


@pytest.fixture
def slow_tabs(monkeypatch):
    """Make the server answer chosen tabs late (seconds per tab), as a loaded server would."""
    delays = SlowTabs()
    render = clusters.views.clusters.render

    def late_render(request, template, *args, **kwargs):
        tab = template.partition("#tab-")[2]
        with delays.lock:
            delays.making += 1
        try:
            if tab in delays:
                time.sleep(delays[tab])
            return render(request, template, *args, **kwargs)
        finally:
            with delays.lock:
                delays.making -= 1

    monkeypatch.setattr(clusters.views.clusters, "render", late_render)
    return delays


# Nothing htmx started is still going on: no request out, nothing swapping or settling.
HTMX_IDLE = "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"


def every_answer_in(page, slow_tabs):
    """Wait until the server has made every answer and the page has done with them (an
    answer still on its way keeps its tab's ``htmx-request`` class)."""
    wait_until(
        lambda: slow_tabs.making == 0 and page.evaluate(HTMX_IDLE), 30, 0.05, "the tabs' answers"
    )


def test_the_last_tab_clicked_wins_however_fast_the_clicks(
    browser_login, page, live_server, slow_tabs
):
    cluster = running_cluster()
    browser_login("admin")
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/vms/")
    members_url = re.compile(rf"/clusters/{cluster.pk}/vms/$")
    for attempt in range(12):
        # 정보 answers late; 연결된 가상머신 sometimes later still, sometimes at once.
        slow_tabs.update(info=0.4, members=0.7 if attempt % 2 else 0.0)
        page.get_by_role("tab", name="정보").click()
        page.get_by_role("tab", name="연결된 가상머신").click()
        every_answer_in(page, slow_tabs)
        expect(page.locator("#tab-panel")).to_have_attribute("data-tab", "members")
        expect(page).to_have_url(members_url)
        expect(page.get_by_role("tab", name="연결된 가상머신")).to_have_attribute(
            "aria-selected", "true"
        )
        expect(page.locator("#tab-body")).to_contain_text("gpu-node-01")
    # and the other way round: 정보 clicked last wins too
    slow_tabs.update(members=0.4, info=0.0)
    page.get_by_role("tab", name="연결된 가상머신").click()
    page.get_by_role("tab", name="정보").click()
    every_answer_in(page, slow_tabs)
    expect(page.locator("#tab-panel")).to_have_attribute("data-tab", "info")
    expect(page).to_have_url(re.compile(rf"/clusters/{cluster.pk}/$"))
