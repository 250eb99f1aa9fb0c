"""The 메트릭 tab in Chromium: plotly.js (the vendored bundle of the tab's trace types) served
locally, figures drawn under the real CSP, redrawn after the range control's htmx swap, and
no script error or CSP violation."""

import os
import random
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from clusters.models import ClusterStatus
from metrics import storage
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from vms.models import VmStatus

SCREENSHOT = os.environ.get("METRICS_SCREENSHOT")  # a path, to look at the tab
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


def running_cluster_with_samples(world, name):
    cluster = world.cluster(name, status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2, status=VmStatus.RUNNING)
    rng = random.Random(1)
    now = timezone.now()
    rows = [
        (
            vm.pk,
            now - timedelta(seconds=10 * i),
            rng.uniform(0, 100),
            40.0,
            95.0,
            70.0,
            1e8,
            1e7,
            2e10,
            2e10,
        )
        for vm in members
        for i in range(360)
    ]
    storage.write_samples(rows)
    storage.rollup()
    return cluster


def signed_in_viewer(world, live_server, page):
    """The page signed in as the viewer; returns the list its script errors go to."""
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )  # favicon
    client = Client()
    client.force_login(world.users["viewer"])
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return errors


def plotly_scripts(page):
    return page.evaluate(
        "document.querySelectorAll('script[src$=\"plotly-metrics.min.js\"]').length"
    )


def test_metrics_tab_draws_the_charts_and_switches_range(world, live_server, page):
    cluster = running_cluster_with_samples(world, "browser-metrics")
    errors = signed_in_viewer(world, live_server, page)

    page.goto(live_server.url + reverse("clusters:cluster_metrics", args=[cluster.pk]))
    plots = page.locator("#metrics-body .metrics-plot.js-plotly-plot")  # drawn by plotly.js
    expect(plots).to_have_count(6, timeout=15_000)  # no device rows: no heatmap
    expect(page.locator("#metrics-body")).to_have_attribute("data-range", "1h")

    page.get_by_label("24시간").check()
    expect(page.locator("#metrics-body")).to_have_attribute("data-range", "24h")
    expect(plots).to_have_count(6)
    assert plotly_scripts(page) == 1
    assert errors == []
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)


def test_another_tab_runs_plotly_once_idle_and_metrics_opens_with_it(world, live_server, page):
    """On the 정보 tab plotly.js is fetched and run once the page is idle, so the 메트릭 tab
    opened later draws with it (not a second copy); opened before, it draws all the same."""
    cluster = running_cluster_with_samples(world, "browser-idle-plotly")
    errors = signed_in_viewer(world, live_server, page)
    detail = live_server.url + reverse("clusters:cluster_detail", args=[cluster.pk])
    plots = page.locator("#metrics-body .metrics-plot.js-plotly-plot")

    page.goto(detail)
    page.wait_for_function("() => window.Plotly !== undefined", timeout=15_000)
    assert plotly_scripts(page) == 1
    page.get_by_role("tab", name="메트릭").click()
    expect(plots).to_have_count(6, timeout=15_000)
    assert plotly_scripts(page) == 1

    page.goto(detail)  # clicked at once: the tab's frame starts plotly.js if idle has not
    page.get_by_role("tab", name="메트릭").click()
    expect(plots).to_have_count(6, timeout=15_000)
    assert plotly_scripts(page) == 1
    assert errors == []
