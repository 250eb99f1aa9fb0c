"""The 메트릭 tab keeps the view across its refresh, in Chromium, in Korean at 1280 and 390 px.

The README's cluster (gpu-node-01…04) running with a quarter of an hour of the simulator's
samples. The user switches the heatmap to 온도, picks a range, scrolls; the refresh (the
30-second poll's request, fired here by the event it also listens to, ``cluster-changed``)
keeps all three. At 390 px the chart toolbar (plotly's modebar) never covers the heatmap's
사용률/온도/전력 toggles. With every member 방금 합류, 하위 5 says why it lists nobody.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from metrics import simulate
from tests.browser.pages import demo_cluster, running_a_quarter_hour, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]
WIDTHS = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]
HEATMAP = "[data-metrics-figure='metrics-fig-heatmap'].js-plotly-plot"
# The heatmap's toggle that is on (plotly marks the active button's rect with its fill).
ACTIVE_TOGGLE = """el => {
  const buttons = Array.from(el.querySelectorAll('.updatemenu-button'));
  const on = buttons.find(b => b.querySelector('rect').style.fill === 'rgb(244, 250, 255)');
  return on ? on.textContent : null;
}"""
SCROLL_TO_FOURTH_CHART = """() => {
  const chart = document.querySelectorAll('.metrics-grid .metrics-chart')[3];
  window.scrollTo(0, chart.getBoundingClientRect().top + window.scrollY);
  return window.scrollY;
}"""
# Every scroll position the page passes through from now on.
WATCH_SCROLL = """() => {
  window.scrolls = [];
  window.addEventListener('scroll', () => window.scrolls.push(window.scrollY));
}"""
# Which heatmap trace is drawn (its name: 사용률, 온도, 전력).
SHOWN_TRACE = "el => el.data.filter(t => t.visible === true).map(t => t.name)"


@pytest.fixture
def running(demo):
    cluster = demo_cluster("keep-view", NODES, start=True)
    running_a_quarter_hour(NODES)
    return cluster


def open_tab(page, live_server, cluster, viewport):
    page.set_viewport_size(viewport)
    page.goto(live_server.url + reverse("clusters:cluster_metrics", args=[cluster.pk]))
    expect(page.locator("#metrics-body .metrics-plot.js-plotly-plot")).to_have_count(7)
    expect(page.locator(HEATMAP)).to_have_count(1)


def refresh(page):
    """The poll's request, now: mark the body the page shows, fire the event the poll also
    listens to, and wait until a new body has drawn every chart and its heatmap."""
    page.evaluate("document.getElementById('metrics-body').dataset.before = '1'")
    page.evaluate("document.body.dispatchEvent(new CustomEvent('cluster-changed'))")
    expect(page.locator("#metrics-body:not([data-before])")).to_have_count(1)
    expect(page.locator("#metrics-body .metrics-plot.js-plotly-plot")).to_have_count(7)
    expect(page.locator(HEATMAP)).to_have_count(1)
    expect(page.locator("#metrics-body[data-drawn]")).to_have_count(1)


@pytest.mark.parametrize("viewport", WIDTHS, ids=["1280", "390"])
def test_the_refresh_keeps_metric_range_and_scroll(
    running, browser_login, page, live_server, viewport
):
    browser_login("admin")
    open_tab(page, live_server, running, viewport)
    page.locator("#metrics-panel").get_by_text("6시간").click()
    expect(page.locator("#metrics-body")).to_have_attribute("data-range", "6h")
    expect(page.locator("#metrics-body[data-drawn]")).to_have_count(1)
    heatmap = page.locator(HEATMAP)
    heatmap.locator(".updatemenu-button", has_text="온도").click()
    expect(heatmap.locator(".updatemenu-button", has_text="온도")).to_have_count(1)
    assert heatmap.evaluate(SHOWN_TRACE) == ["온도"]
    # Down to the fourth chart's top, as far as the page goes.
    scrolled = page.evaluate(SCROLL_TO_FOURTH_CHART)
    assert scrolled > 300
    shoot(page, "metrics-keep-before")

    page.evaluate(WATCH_SCROLL)
    refresh(page)
    # Never moved, not even while the body was being redrawn.
    assert set(page.evaluate("window.scrolls")) <= {scrolled}
    assert page.evaluate("window.scrollY") == scrolled
    expect(page.locator("#metrics-body")).to_have_attribute("data-range", "6h")
    expect(page.locator("#metrics-panel input[name=range][value='6h']")).to_be_checked()
    assert heatmap.evaluate(SHOWN_TRACE) == ["온도"]
    assert heatmap.evaluate(ACTIVE_TOGGLE) == "온도"
    shoot(page, "metrics-keep-after")


def test_on_a_phone_the_toolbar_never_covers_the_heatmap_toggles(
    running, browser_login, page, live_server
):
    browser_login("admin")
    open_tab(page, live_server, running, WIDTHS[1])
    heatmap = page.locator(HEATMAP)
    heatmap.hover()  # plotly shows its modebar on hover, a tap on a phone
    modebar = heatmap.locator(".modebar").bounding_box()
    toggles = heatmap.locator(".updatemenu-container").bounding_box()
    assert modebar and toggles
    apart = (
        modebar["x"] >= toggles["x"] + toggles["width"]
        or toggles["x"] >= modebar["x"] + modebar["width"]
        or modebar["y"] >= toggles["y"] + toggles["height"]
        or toggles["y"] >= modebar["y"] + modebar["height"]
    )
    assert apart, (modebar, toggles)
    heatmap.locator(".updatemenu-button", has_text="전력").click()
    assert heatmap.evaluate(SHOWN_TRACE) == ["전력"]


@pytest.mark.parametrize("viewport", WIDTHS, ids=["1280", "390"])
def test_bottom_five_says_why_when_every_member_just_joined(
    demo, browser_login, page, live_server, viewport
):
    cluster = demo_cluster("just-joined", NODES, start=True)
    now = timezone.now()
    for i in range(12, 0, -1):  # two minutes of the simulator's ten-second samples
        simulate.emit_samples(now - timedelta(seconds=10 * i))
    browser_login("admin")
    page.set_viewport_size(viewport)
    page.goto(live_server.url + reverse("clusters:cluster_metrics", args=[cluster.pk]))
    expect(page.locator("#metrics-joined")).to_contain_text("방금 합류")
    expect(page.locator(".metrics-bottom")).to_contain_text(
        "멤버가 모두 방금 합류해 아직 순위를 매기지 않습니다. "
        "멤버마다 데이터가 5분 넘게 쌓이면 표시됩니다."
    )
    expect(page.locator(".metrics-bottom-table")).to_have_count(0)
    shoot(page, "metrics-all-joined")
