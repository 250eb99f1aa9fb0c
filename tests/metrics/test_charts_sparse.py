"""Charts draw the points they have: a range whose data fills a bucket or two (7일's current
hour, a new cluster's 24시간) draws markers and says 집계 대기 중 instead of empty axes; a
range change shows it is loading; the heatmap's scales are colour-blind safe and known to the
vendored plotly.js bundle, which holds every trace type the tab draws."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from clusters.models import ClusterStatus
from metrics.storage.straggler import DeviceView, GpuFigure, heatmap_figure
from metrics.views.pages import heatmap_labels
from tests.metrics.test_charts import get_figures, write_recent
from vms.models import VmStatus


@pytest.fixture
def cluster(world):
    cluster = world.cluster("fresh", status=ClusterStatus.RUNNING)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    return cluster


@pytest.mark.parametrize("range_key", ["7d", "24h"])
def test_a_new_clusters_few_points_are_drawn_as_markers(login, cluster, range_key):
    write_recent(cluster.members.first(), 5)
    figures, html = get_figures(login("viewer"), cluster, range=range_key)
    cpu = figures["cpu"]["data"][0]
    assert [v for v in cpu["y"] if v is not None] in ([10.0], [10.0, 10.0])  # a bucket edge
    assert "markers" in cpu["mode"]
    assert 'id="metrics-pending"' in html and "집계 대기 중" in html


def test_a_full_range_draws_lines_without_the_pending_note(login, cluster):
    write_recent(cluster.members.first(), 299)
    figures, html = get_figures(login("viewer"), cluster, range="1h")
    assert figures["cpu"]["data"][0]["mode"] == "lines"
    assert "집계 대기 중" not in html


def test_a_range_change_shows_it_is_loading(login, cluster):
    _figures, html = get_figures(login("viewer"), cluster, range="1h")
    assert 'hx-indicator="#metrics-panel"' in html and 'id="metrics-loading"' in html


BUNDLE = Path(settings.BASE_DIR) / "static/metrics/vendor/plotly-metrics.min.js"


def test_heatmap_scales_are_colour_blind_safe_and_in_the_bundle():
    bundle = BUNDLE.read_text()
    for _label, _unit, scale, _range in heatmap_labels().values():
        assert scale in ("Cividis", "Viridis")
        assert f"{scale}:[[0," in bundle


def test_every_trace_type_the_tab_draws_is_in_the_bundle(login, cluster):
    """The bundle holds only the trace types the tab draws (metrics/plotly_bundle/entry.js): a
    figure with another type would draw nothing in the browser."""
    write_recent(cluster.members.first(), 299)
    figures, _html = get_figures(login("viewer"), cluster, range="1h")
    gpus = [GpuFigure(vm_id=1, node="node-1", gpu=0, util=50.0, temp=60.0, power=300.0)]
    figures["heatmap"] = heatmap_figure(DeviceView(gpus=gpus), heatmap_labels())
    drawn = {trace.get("type", "scatter") for f in figures.values() for trace in f["data"]}
    bundle = BUNDLE.read_text()
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    assert drawn == {"scatter", "heatmap"} and drawn <= registered
