"""The 메트릭 tab: its figures equal an aggregate computed here, independently, from the
raw samples (the cluster lines: ``cluster_reference``; per member: ``per_vm_buckets``); it
reads the right source per range; permissions; the empty state."""

import json
import random
import re
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import plotly.graph_objects as go
import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import storage
from metrics.figures import script_safe
from metrics.models import METRIC_NAMES
from metrics.storage import charts
from tests.metrics import cluster_reference
from vms.models import VmStatus

FIGURE = re.compile(
    r'<script type="application/json" id="metrics-fig-([\w-]+)">(.*?)</script>', re.S
)
# (figure id, trace index) -> (series, scale, digits)
EXPECTED = {
    ("gpu", 0): ("gpu_util", 1, 1),  # the members' mean
    ("gpu", 1): ("gpu_util_min", 1, 1),  # the slowest member
    ("gpu-mem", 0): ("gpu_mem_util", 1, 1),
    ("cpu", 0): ("cpu_util", 1, 1),
    ("mem", 0): ("mem_util", 1, 1),
    ("net", 0): ("net_rx", 1e6, 2),  # the members' total
    ("net", 1): ("net_tx", 1e6, 2),
    ("fabric", 0): ("fabric_rx", 1e9 / 8, 1),  # Gb/s
    ("fabric", 1): ("fabric_tx", 1e9 / 8, 1),
}


@pytest.fixture
def cluster(world):
    cluster = world.cluster("chart", status=ClusterStatus.RUNNING)
    world.members(cluster, 3, status=VmStatus.RUNNING)
    return cluster


@pytest.fixture
def samples(cluster):
    """Two hours of 10-second samples of three members, ending 5 minutes ago (so all of it is
    rolled up), with gaps, and one member whose GPU and fabric never report."""
    rng = random.Random(5)
    now = timezone.now()
    start = storage.floor_to(now, 3600) - timedelta(hours=2)
    members = list(cluster.members.order_by("pk"))
    rows = []
    at = start
    while at < now - timedelta(minutes=5):
        for index, vm in enumerate(members):
            if rng.random() < 0.1:
                continue  # a lost sample
            has_devices = index != 2
            rows.append(
                (
                    vm.pk,
                    at + timedelta(seconds=rng.uniform(0, 9)),
                    rng.uniform(0, 100),
                    rng.uniform(0, 100),
                    rng.uniform(0, 100) if has_devices else None,
                    rng.uniform(0, 100) if has_devices else None,
                    rng.uniform(0, 1e9),
                    rng.uniform(0, 1e9),
                    rng.uniform(0, 25e9) if has_devices else None,
                    rng.uniform(0, 25e9) if has_devices else None,
                )
            )
        at += timedelta(seconds=10)
    storage.write_samples(rows)
    storage.rollup()
    return rows


def per_vm_buckets(rows, step, until=None):
    """{bucket: {vm: {series: mean}}}, computed in Python from the raw rows."""
    names = METRIC_NAMES
    acc = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for vm_id, at, *values in rows:
        if until is not None and at >= until:
            continue
        bucket = int(at.timestamp()) // step
        for name, value in zip(names, values, strict=True):
            if value is not None:
                acc[bucket][vm_id][name].append(value)
    return {
        b: {vm: {n: statistics.fmean(v) for n, v in series.items()} for vm, series in by_vm.items()}
        for b, by_vm in acc.items()
    }


def expected_lines(rows, cluster, step):
    """{bucket: {series: value}} of the cluster's lines, from the raw rows (all written while
    their VMs were members)."""
    records = [
        (vm_id, at, cluster.pk, dict(zip(METRIC_NAMES, values, strict=True)))
        for vm_id, at, *values in rows
    ]
    return cluster_reference.chart(records, cluster.pk, step)


def write_recent(vm, count):
    """``count`` samples of ``vm``, one every 10 s back from now, the same figures each
    (CPU 10 %, memory 20 %, GPU 50 %, GPU memory 60 %, no fabric)."""
    now = timezone.now()
    storage.write_samples(
        [
            (vm.pk, now - timedelta(seconds=10 * i), 10.0, 20.0, 50.0, 60.0, 1.0, 1.0, None, None)
            for i in range(1, count + 1)
        ]
    )


def get_figures(client, cluster, **params):
    response = client.get(reverse("metrics:cluster_charts", args=[cluster.pk]), params)
    assert response.status_code == 200
    html = response.content.decode()
    return {key: json.loads(text) for key, text in FIGURE.findall(html)}, html


def bucket_of(trace, index):
    local = datetime.strptime(trace["x0"], "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=ZoneInfo(settings.TIME_ZONE)
    )
    return int(local.timestamp() + index * trace["dx"] / 1000)


def assert_matches(trace, expected, scale, digits, step):
    compared = 0
    for index, got in enumerate(trace["y"]):
        want = expected.get(bucket_of(trace, index) // step)
        if want is None:
            assert got is None, (index, got)
            continue
        assert got is not None, index
        assert abs(got - want / scale) <= 0.5 * 10**-digits + 1e-9, (index, got, want / scale)
        compared += 1
    return compared


@pytest.mark.parametrize("range_key", ["1h", "6h", "24h", "7d"])
def test_chart_json_equals_an_independent_aggregate(login, cluster, samples, range_key):
    """Every bucket, the current hour of 7d included (rolled-up hours, then minutes, then
    raw samples: the same figures as the raw rows give)."""
    client = login("viewer")
    figures, _html = get_figures(client, cluster, range=range_key)
    assert {"gpu", "gpu-mem", "cpu", "mem", "net", "fabric"} <= set(figures)
    step = charts.RANGES[range_key].cluster[1]
    lines = expected_lines(samples, cluster, step)
    compared = 0
    for (figure_id, trace_index), (series, scale, digits) in EXPECTED.items():
        trace = figures[figure_id]["data"][trace_index]
        assert trace["dx"] == step * 1000
        expected = {b: v[series] for b, v in lines.items() if v[series] is not None}
        compared += assert_matches(trace, expected, scale, digits, step)
    assert compared >= 9 * (2 if range_key == "7d" else 30)  # 7d: two hours at least


def test_7d_includes_the_current_hour(login, cluster):
    """Samples of the last minutes only (no hour rolled up yet): 7d shows them, as 1h does."""
    write_recent(cluster.members.first(), 29)
    storage.rollup()
    figures, _html = get_figures(login("viewer"), cluster, range="7d")
    assert figures["cpu"]["data"][0]["y"][-1] == 10.0


def test_per_member_series_are_each_members_own(login, cluster, samples):
    client = login("viewer")
    figures, html = get_figures(client, cluster, range="1h", per_member="1")
    members = list(cluster.members.order_by("name", "id"))
    cpu = figures["cpu"]["data"]
    assert [t["name"] for t in cpu] == [vm.name for vm in members]
    step = cpu[0]["dx"] // 1000
    by_bucket = per_vm_buckets(samples, step)
    for vm, trace in zip(members, cpu, strict=True):
        expected = {b: s[vm.pk]["cpu_util"] for b, s in by_bucket.items() if vm.pk in s}
        assert assert_matches(trace, expected, 1, 1, step) > 10
    assert len(figures["net"]["data"]) == 2 * len(members)
    # The refresh asks for what the form shows: per member stays on.
    assert 'hx-trigger="every 30s, cluster-changed from:body"' in html
    assert 'hx-include="#metrics-controls"' in html
    assert 'name="per_member" value="1" checked' in html


def test_figures_are_valid_plotly_with_korean_axes_and_bounded_points(login, cluster, samples):
    figures, _html = get_figures(login("viewer"), cluster, range="24h")
    for figure in figures.values():
        go.Figure(figure)  # plotly validates every property against its schema
        for trace in figure["data"]:
            assert len(trace["y"]) <= charts.MAX_POINTS
    assert figures["gpu"]["layout"]["yaxis"]["title"]["text"] == "GPU 사용률 (%)"
    assert figures["net"]["layout"]["yaxis"]["title"]["text"] == "네트워크 처리량 (MB/s)"
    assert figures["gpu"]["data"][1]["name"] == "가장 느린 멤버"


@pytest.mark.parametrize("range_key", list(charts.RANGES))
def test_every_range_stays_within_500_points(range_key, cluster):
    data = charts.chart_data(cluster, range_key)
    assert data.points <= charts.MAX_POINTS
    assert data.points * data.step == charts.RANGES[range_key].seconds


def test_per_member_mode_coarsens_for_many_members(world):
    cluster = world.cluster("big", status=ClusterStatus.RUNNING)
    world.members(cluster, 24, status=VmStatus.RUNNING)
    data = charts.chart_data(cluster, "1h", per_member=True)
    assert len(data.shown) == 24
    assert data.points * 24 * 8 <= charts.PER_MEMBER_VALUE_BUDGET
    assert data.step % 20 == 0


def test_per_member_mode_draws_the_slowest_members_of_a_big_cluster(world, login):
    """40 members: the 32 with the lowest GPU utilisation over the range are drawn (the
    others are named nowhere in the breakdown), the page says so, the heatmap keeps all."""
    cluster = world.cluster("big", status=ClusterStatus.RUNNING)
    vms = world.members(cluster, 40, status=VmStatus.RUNNING, prefix="node-")
    now = timezone.now()
    rows = []
    for index, vm in enumerate(vms):
        util = 99.0 - index if index % 2 else 20.0 + index  # odd ones busy, even ones slow
        for k in range(1, 30):
            rows.append(
                (vm.pk, now - timedelta(seconds=10 * k), 5.0, 5.0, util, 50.0, 1.0, 1.0, None, None)
            )
    storage.write_samples(rows)
    data = charts.chart_data(cluster, "1h", per_member=True)
    by_util = sorted(
        vms, key=lambda vm: 99.0 - vms.index(vm) if vms.index(vm) % 2 else 20.0 + vms.index(vm)
    )
    assert {vm_id for vm_id, _name in data.shown} == {vm.pk for vm in by_util[:32]}
    assert len(data.members) == 40
    assert [name for _id, name in data.shown] == sorted(name for _id, name in data.shown)
    figures, html = get_figures(login("viewer"), cluster, range="1h", per_member="1")
    assert len(figures["cpu"]["data"]) == 32
    assert "멤버 40대 중 이 기간 GPU 사용률이 가장 낮은 32대만 그립니다." in html
    busiest = vms[1].name  # 98%: not among the 32 lowest
    assert busiest not in {t["name"] for t in figures["gpu"]["data"]}


def test_refresh_returns_only_the_body_and_polls_only_for_1h(login, cluster, samples):
    client = login("viewer")
    url = reverse("metrics:cluster_charts", args=[cluster.pk])
    headers = {"HX-Request": "true", "HX-Target": "metrics-body"}
    body = client.get(url, {"range": "1h"}, headers=headers).content.decode()
    assert body.lstrip().startswith('<div id="metrics-body"') and "<form" not in body
    assert 'hx-trigger="every 30s, cluster-changed from:body"' in body
    day = client.get(url, {"range": "24h"}, headers=headers).content.decode()
    assert "every 30s" not in day and 'hx-trigger="cluster-changed from:body"' in day
    full = client.get(url, {"range": "bogus"}).content.decode()
    assert 'value="1h" checked' in full and "metrics/charts.js" in full
    assert "metrics/vendor/plotly-metrics.min.js" in full


def test_no_data_says_so_and_explains_the_agent(login, cluster):
    url = reverse("metrics:cluster_charts", args=[cluster.pk])
    html = login("viewer").get(url).content.decode()
    assert "아직 수신된 메트릭이 없습니다" in html
    assert "vc-metrics-agent --url http://testserver/api/metrics/ingest" in html
    assert "application/json" not in html


def test_no_members_says_so(login, world):
    cluster = world.cluster("empty")
    url = reverse("metrics:cluster_charts", args=[cluster.pk])
    html = login("viewer").get(url).content.decode()
    assert "연결된 가상머신이 없습니다" in html


@pytest.mark.parametrize(
    ("user", "status"), [("viewer", 200), ("operator", 200), ("other", 404), ("norole", 404)]
)
def test_charts_need_cluster_read(login, cluster, user, status):
    url = reverse("metrics:cluster_charts", args=[cluster.pk])
    assert login(user).get(url).status_code == status


def test_anonymous_goes_to_login(client, cluster):
    response = client.get(reverse("metrics:cluster_charts", args=[cluster.pk]))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_script_safe_escapes_closing_tags():
    assert "</script>" not in script_safe('{"name": "</script><b>&"}')
    assert json.loads(script_safe('{"name": "</script>&"}')) == {"name": "</script>&"}


def test_bucket_alignment_is_in_utc_epoch(cluster):
    data = charts.chart_data(cluster, "7d", now=datetime(2031, 1, 1, 12, 30, tzinfo=UTC))
    assert data.start == datetime(2030, 12, 25, 13, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_gpu_charts_say_which_members_report_no_gpu_instead_of_drawing_zeros(
    login, cluster, samples
):
    """A member without a GPU (a guest with no GPU, like the libvirt backend's emulated
    hosts) sends null GPU fields: its GPU lines stay empty and the GPU charts say so."""
    client = login("viewer")
    figures, html = get_figures(client, cluster, range="6h")
    assert "멤버 3대 중 1대가 GPU를 보고하지 않습니다" in html
    assert html.count('class="metrics-no-gpu"') == 2  # GPU utilisation and GPU memory
    no_gpu = cluster.members.order_by("pk")[2]
    figures, html = get_figures(client, cluster, range="6h", per_member="1")
    assert f"GPU를 보고하지 않는 멤버: {no_gpu.name}" in html
    (trace,) = [t for t in figures["gpu"]["data"] if t["name"] == no_gpu.name]
    assert all(value is None for value in trace["y"])  # never zeros


@pytest.mark.django_db
def test_a_cluster_whose_members_have_no_gpu_says_so(login, world):
    cluster = world.cluster("cpu-only", status=ClusterStatus.RUNNING)
    (vm,) = world.members(cluster, 1, status=VmStatus.RUNNING)
    now = timezone.now()
    storage.write_samples(
        [
            (vm.pk, now - timedelta(seconds=30 * i), 20.0, 30.0, None, None, 1e5, 1e5, None, None)
            for i in range(1, 10)
        ]
    )
    figures, html = get_figures(login("viewer"), cluster, range="1h")
    assert "멤버가 GPU를 보고하지 않습니다 (GPU가 없는 VM)" in html
    assert all(v is None for v in figures["gpu"]["data"][0]["y"])
    assert any(v is not None for v in figures["cpu"]["data"][0]["y"])
