"""A running cluster on a phone (390 px) and in English, in Chromium.

The README's cluster (gpu-node-01…04) running, with a quarter of an hour of the simulator's
samples and a 검증 that judged gpu-node-03 불량. At 390 px, in Korean and in English: the page
never scrolls sideways, nor do the named containers (the header, the members table, the
메트릭 tab, 하위 5, 검증's verdicts); every member's 상태 is on screen and is what a tap there
would hit (no sticky column over it); the cluster's name is not broken letter by letter;
the heatmap's GPU labels stand upright, apart and legible; the top bar fits. At 1280 px the
English 메트릭 tab fits too, and gaps are in one unit (pp).

``SCREENSHOTS=/some/dir`` saves each page at 1280 and 390 px, in Korean and English.
"""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from clusters import operations
from tests.browser.pages import demo_cluster, running_a_quarter_hour, shoot, switch_language

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]
# A name with a word as long as a phone's line allows: it must wrap at its hyphens at most.
NAME = "llm-pretrain-h100-cluster"


@pytest.fixture
def busy_cluster(demo):
    """gpu-node-01…04 attached in name order, cluster and members 실행중 (eager tasks), 15
    minutes of samples, a finished 검증 (gpu-node-03 불량, with its reasons)."""
    cluster = demo_cluster(NAME, NODES, start=True)
    running_a_quarter_hour(NODES)
    admin = get_user_model().objects.get(username="admin")
    operations.start_validation(cluster.pk, actor=admin, level=2)
    return cluster


# What scrolls sideways: the page, and each element matching the selectors (its own
# scrollWidth, and whether it reaches past the screen's edges).
SIDEWAYS = """
(selectors) => {
  const width = document.documentElement.clientWidth;
  const found = [];
  if (document.documentElement.scrollWidth > width) {
    found.push(`page: ${document.documentElement.scrollWidth} > ${width}`);
  }
  for (const selector of selectors) {
    const elements = document.querySelectorAll(selector);
    if (!elements.length) found.push(`${selector}: not on the page`);
    for (const el of elements) {
      const r = el.getBoundingClientRect();
      if (el.scrollWidth > el.clientWidth + 1) {
        found.push(`${selector}: scrolls (${el.scrollWidth} > ${el.clientWidth})`);
      }
      if (r.left < -0.5 || r.right > width + 0.5) {
        found.push(`${selector}: ${Math.round(r.left)}..${Math.round(r.right)} of ${width}`);
      }
    }
  }
  return found;
}
"""


def sideways(page, *selectors):
    return page.evaluate(SIDEWAYS, list(selectors))


# Each member's 상태: bring its row into view vertically only (never sideways, which would
# hide the fault), then ask whether the badge is on screen and is what a tap on it hits.
STATUS_ON_SCREEN = """
(cells) => cells.map((cell) => {
  const badge = cell.querySelector(".badge") || cell;
  const top = badge.getBoundingClientRect().top + window.scrollY;
  window.scrollTo(0, Math.max(0, top - window.innerHeight / 2));
  const r = badge.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {
    vm: cell.closest("tr").dataset.vm,
    text: badge.textContent.trim(),
    onScreen: r.width > 0 && r.left >= 0 && r.right <= window.innerWidth,
    uncovered: !!hit && cell.contains(hit),
  };
})
"""

# How many lines an element's text takes (one rect per line box of the text).
TEXT_LINES = """
(el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
  return tops.size;
}
"""

# The heatmap's tick labels: upright, apart and at least 11 px.
TICKS = """
(plot) => ["xtick", "ytick"].map((axis) => {
  const labels = Array.from(plot.querySelectorAll(`g.${axis} text`));
  const boxes = labels.map((t) => t.getBoundingClientRect());
  let overlaps = 0;
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const apart = a.right <= b.left + 0.5 || b.right <= a.left + 0.5
        || a.bottom <= b.top + 0.5 || b.bottom <= a.top + 0.5;
      if (!apart) overlaps++;
    }
  }
  return {
    axis,
    texts: labels.map((t) => t.textContent),
    rotated: labels.filter((t) => /rotate\\((?!0[,)])/.test(t.getAttribute("transform") || ""))
      .length,
    smallest: Math.min(...labels.map((t) => parseFloat(getComputedStyle(t).fontSize))),
    overlaps,
  };
})
"""


def check_members(page, language):
    table = page.locator(".members-table")
    expect(table.locator("tbody tr")).to_have_count(len(NODES))
    assert sideways(page, ".table-wrap:has(.members-table)", ".members-table") == []
    cells = table.locator("td.member-status").evaluate_all(STATUS_ON_SCREEN)
    assert [c["vm"] for c in cells] == NODES
    hidden = [c for c in cells if not (c["onScreen"] and c["uncovered"])]
    assert hidden == [], f"상태 hidden or covered at {page.viewport_size['width']} px"
    assert {c["text"] for c in cells} == {"실행중" if language == "ko" else "Running"}


def check_header(page):
    assert sideways(page, "#cluster-header", ".topbar") == []
    title = page.locator("#cluster-header h1")
    expect(title).to_have_text(NAME)
    assert title.evaluate(TEXT_LINES) <= 2, "the name wraps letter by letter"
    # Every control of the top bar is on screen.
    boxes = page.locator(".topbar a, .topbar button, .topbar select").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return {name: e.textContent.trim() || e.id, left: r.left, right: r.right}; })"
    )
    width = page.viewport_size["width"]
    assert [b for b in boxes if b["left"] < 0 or b["right"] > width + 0.5] == []


def check_metrics(page, language):
    heatmap = page.locator("[data-metrics-figure='metrics-fig-heatmap'].js-plotly-plot")
    expect(heatmap).to_have_count(1)
    expect(page.locator("#metrics-body .metrics-plot.js-plotly-plot")).to_have_count(7)
    expect(page.locator(".metrics-bottom-table tbody tr")).to_have_count(5)
    assert (
        sideways(page, "#metrics-panel", ".metrics-devices", ".metrics-bottom", ".metrics-grid")
        == []
    )
    x, y = heatmap.evaluate(TICKS)
    assert x["texts"] == [str(i) for i in range(8)], x
    assert sorted(y["texts"]) == NODES, y  # drawn bottom-up
    for axis in (x, y):
        assert axis["rotated"] == 0 and axis["overlaps"] == 0, axis
        assert axis["smallest"] >= 11, axis
    # One unit for a gap to the median: %p in Korean, pp in English, never both.
    gaps = page.locator(".metrics-bottom-table tbody td:nth-child(4)").all_inner_texts()
    gaps += [page.locator("#metrics-straggler span").inner_text()]
    unit = "%p" if language == "ko" else " pp"
    assert all(unit in text for text in gaps), gaps
    assert not any(("%p" if language == "en" else "pp") in text for text in gaps), gaps


def check_validation(page):
    run = page.locator("#validation-section article.validation-run").first
    expect(run).to_have_attribute("data-done", "1")
    expect(run.locator('[data-verdict-vm="gpu-node-03"]')).to_contain_text("GPU 5")
    assert sideways(page, "#validation-section", ".table-wrap:has(> .verdict-table)") == []


@pytest.mark.parametrize("language", ["ko", "en"])
def test_a_running_cluster_fits_a_phone_and_keeps_its_states_in_view(
    busy_cluster, browser_login, page, live_server, language
):
    browser_login("admin")
    if language == "en":
        switch_language(page, "en")
    base = f"{live_server.url}/clusters/{busy_cluster.pk}"
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(f"{base}/")
        expect(page.locator("#validation-section article.validation-run")).to_have_count(1)
        shoot(page, "phone-cluster-info")
        check_header(page)
        check_validation(page)
        page.goto(f"{base}/vms/")
        expect(page.locator(".members-table tbody tr")).to_have_count(len(NODES))
        shoot(page, "phone-cluster-members")
        check_members(page, language)
        page.goto(f"{base}/metrics/")
        expect(page.locator("#metrics-body .metrics-plot.js-plotly-plot")).to_have_count(7)
        shoot(page, "phone-cluster-metrics")
        check_metrics(page, language)


# The focused tab's ring: its colour, and whether all of it lies inside the tab list, which
# scrolls sideways and so clips whatever reaches past its box.
RING = """
(tab) => {
  const style = getComputedStyle(tab);
  const width = parseFloat(style.outlineWidth), offset = parseFloat(style.outlineOffset);
  const r = tab.getBoundingClientRect(), list = tab.closest("[role=tablist]");
  const clip = list.getBoundingClientRect();
  const grow = width + offset;
  return {
    focusVisible: tab.matches(":focus-visible"),
    style: style.outlineStyle,
    width,
    colour: style.outlineColor,
    inside: r.left - grow >= clip.left + list.clientLeft - 0.5
      && r.right + grow <= clip.left + list.clientLeft + list.clientWidth + 0.5
      && r.top - grow >= clip.top + list.clientTop - 0.5
      && r.bottom + grow <= clip.top + list.clientTop + list.clientHeight + 0.5,
  };
}
"""


def rgb_hex(css_colour):
    red, green, blue = (int(v) for v in re.findall(r"\d+", css_colour)[:3])
    return f"#{red:02x}{green:02x}{blue:02x}"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_focused_tab_shows_its_whole_ring(
    busy_cluster, browser_login, page, live_server, viewport
):
    from tests.portal.test_accessibility import contrast

    browser_login("admin")
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/clusters/{busy_cluster.pk}/")
    page.get_by_role("tab", name="정보").focus()
    for name in ("연결된 가상머신", "메트릭", "활동"):  # moved by the keyboard: focus-visible
        page.keyboard.press("ArrowRight")
        tab = page.get_by_role("tab", name=name)
        expect(tab).to_be_focused()
        ring = tab.evaluate(RING)
        assert ring["focusVisible"] and ring["style"] == "solid" and ring["width"] >= 2, ring
        assert ring["inside"], f"the ring of {name} is clipped by the tab list"
        assert contrast(rgb_hex(ring["colour"]), "#ffffff") >= 3
        assert contrast(rgb_hex(ring["colour"]), "#f5f6f8") >= 3
    shoot(page, "phone-focus-tab")


# Each element's left and right edge, and the screen's width.
EDGES = """
(selectors) => selectors.map((selector) => {
  const el = document.querySelector(selector);
  if (!el) return [selector, null];
  const r = el.getBoundingClientRect();
  const width = document.documentElement.clientWidth;
  return [selector, [Math.round(r.left), Math.round(r.right), width]];
})
"""


@pytest.mark.parametrize("language", ["ko", "en"])
def test_an_empty_list_says_so_within_a_phone_screen(
    demo, browser_login, page, live_server, language
):
    """The table's columns scroll sideways on a phone; the empty list's words and buttons,
    spanning those columns, stay in the part on screen."""
    browser_login("admin")
    if language == "en":
        switch_language(page, "en")
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/clusters/")
    expect(page.locator("#empty-create")).to_be_visible()
    shoot(page, "phone-empty-list")
    edges = page.evaluate(EDGES, [".empty-body", "#empty-create"])
    page.goto(f"{live_server.url}/clusters/?q=no-such-cluster")
    expect(page.locator("#clear-filters")).to_be_visible()
    edges += page.evaluate(EDGES, [".empty-body", "#no-match", "#clear-filters"])
    for selector, (left, right, width) in edges:
        assert 0 <= left and right <= width, f"{selector}: {left}..{right} of {width}"
