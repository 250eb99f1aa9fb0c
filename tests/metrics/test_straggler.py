"""The 메트릭 tab names the slow node: the heatmap and 하위 5 equal an aggregate computed
here from the raw rows; the straggler line; empty states; last received; device error
events on the 활동 tab and as chart markers."""

import json
import random
import re
import statistics
from collections import defaultdict
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import storage, tasks
from portal.models import AuditEvent
from vms.models import VmStatus

FIGURE = re.compile(
    r'<script type="application/json" id="metrics-fig-([\w-]+)">(.*?)</script>', re.S
)
NONE = [None] * 11
DEVICES_SLOT = re.compile(r'<div id="metrics-devices" hx-get="([^"]+)".*?</div>', re.S)


@pytest.fixture
def cluster(world):
    cluster = world.cluster("heat", status=ClusterStatus.RUNNING)
    world.members(cluster, 3, status=VmStatus.RUNNING)
    return cluster


def write(members, start, stop, util_of, ports=None, gap=None):
    """10-second samples of every member over [start, stop): host rows, 8 GPU rows each
    (``util_of(vm_index, gpu, rng)``), and port rows if ``ports`` (vm_index -> rx B/s);
    none within a minute of ``gap`` (a range's edge: where it falls is then immaterial)."""
    rng = random.Random(3)
    rows, gpu_rows, port_rows = [], [], []
    at = start
    while at < stop:
        if gap is not None and abs((at - gap).total_seconds()) < 60:
            at += timedelta(seconds=10)
            continue
        for index, vm in enumerate(members):
            ts = at + timedelta(seconds=rng.uniform(0, 9))
            fabric = sum(ports(index, p) for p in range(2)) if ports else None
            rows.append((vm.pk, ts, 10.0, 10.0, 50.0, 50.0, 1.0, 1.0, fabric, fabric))
            for gpu in range(8):
                gpu_rows.append(
                    (
                        vm.pk,
                        ts,
                        gpu,
                        util_of(index, gpu, rng),
                        None,
                        None,
                        40 + gpu,
                        300.0 + index,
                        *NONE[:7],
                    )
                )
            if ports:
                for port in range(2):
                    port_rows.append(
                        (vm.pk, ts, port, ports(index, port), 1.0, 0.0, 0.0, 0.0, 4.0, 400.0)
                    )
        at += timedelta(seconds=10)
    storage.write_samples(rows, devices={"gpu": gpu_rows, "port": port_rows})
    return gpu_rows


def page(client, cluster, **params):
    """The 메트릭 tab as a browser ends up with it: the charts, then the per-device panel its
    slot loads (its own request)."""
    response = client.get(reverse("metrics:cluster_charts", args=[cluster.pk]), params)
    assert response.status_code == 200
    html = response.content.decode()
    slot = DEVICES_SLOT.search(html)
    if slot:
        devices = client.get(unescape(slot.group(1)))
        assert devices.status_code == 200
        html = html.replace(slot.group(0), devices.content.decode())
    return html, {key: json.loads(text) for key, text in FIGURE.findall(html)}


@pytest.mark.parametrize(("range_key", "seconds"), [("1h", 3600), ("24h", 86400)])
def test_heatmap_and_bottom_five_equal_an_independent_aggregate(login, cluster, range_key, seconds):
    members = list(cluster.members.order_by("name"))
    now = timezone.now()
    # 3 h of samples: 24h reads hour rollups, minute rollups and raw rows; one GPU is slow.
    gpu_rows = write(
        members,
        now - timedelta(hours=3),
        now - timedelta(seconds=5),
        lambda i, g, rng: rng.uniform(40, 60) if (i, g) == (1, 5) else rng.uniform(85, 100),
        gap=now - timedelta(seconds=seconds),
    )
    tasks.rollup()
    html, figures = page(login("viewer"), cluster, range=range_key)

    since = timezone.now() - timedelta(seconds=seconds)
    acc = defaultdict(list)
    for vm_id, ts, gpu, util, *_rest in gpu_rows:
        if ts >= since:
            acc[(vm_id, gpu)].append(util)
    expected = {key: statistics.fmean(values) for key, values in acc.items()}

    heat = figures["heatmap"]["data"][0]
    assert heat["y"] == [vm.name for vm in members] and heat["x"] == [str(g) for g in range(8)]
    for row, vm in zip(heat["z"], members, strict=True):
        for gpu, value in enumerate(row):
            assert abs(value - expected[(vm.pk, gpu)]) <= 0.05 + 1e-9, (vm.name, gpu)
    ranked = sorted(expected.items(), key=lambda item: item[1])
    median = statistics.median(expected.values())
    slow_vm = next(vm for vm in members if vm.pk == ranked[0][0][0])
    assert f"가장 느린 멤버: {slow_vm.name} (GPU 5)" in html
    table = re.search(r'<table class="table metrics-bottom-table">(.*?)</table>', html, re.S)
    cells = re.findall(
        r"<tr><td>(.*?)</td><td>(\d+)</td><td>([\d.-]+)%</td><td>([\d.-]+)%p</td>", table.group(1)
    )
    assert len(cells) == 5
    names = {vm.pk: vm.name for vm in members}
    for (node, gpu, value, gap), ((vm_id, want_gpu), want) in zip(cells, ranked, strict=False):
        assert (node, int(gpu)) == (names[vm_id], want_gpu)
        assert abs(float(value) - want) <= 0.05 + 1e-9
        assert abs(float(gap) - (want - median)) <= 0.05 + 1e-9
    assert len(figures["heatmap"]["data"]) == 3  # utilisation, temperature, power


def test_fabric_in_gbps_with_the_share_of_the_link_and_the_slowest_port(login, cluster):
    members = list(cluster.members.order_by("name"))
    now = timezone.now()
    write(
        members,
        now - timedelta(minutes=20),
        now - timedelta(seconds=5),
        lambda i, g, rng: 90.0,
        ports=lambda i, p: 12.5e9 if (i, p) == (2, 1) else 25e9,
    )
    tasks.rollup()
    html, figures = page(login("viewer"), cluster, range="1h")
    assert f"가장 느린 포트: {members[2].name} (포트 1)" in html
    assert "최근 5분 중앙값과 -50% (기준 20%)" in html
    assert "100.0 Gb/s, 링크의 25%" in html and "중앙값 200.0 Gb/s" in html
    fabric = figures["fabric"]
    assert fabric["layout"]["yaxis"]["title"]["text"] == "패브릭 처리량 (Gb/s)"
    share = next(t for t in fabric["data"] if t.get("yaxis") == "y2")
    # 2 x 50 + 37.5 GB/s = 1,100 Gb/s of 6 ports x 400 Gb/s.
    # The median bucket: the last one may hold only some members' samples so far.
    values = [v for v in share["y"] if v is not None]
    assert statistics.median(values) == pytest.approx(1100 / 2400 * 100, abs=0.06)


def test_never_reported_shows_the_install_steps_and_an_empty_range_says_so(login, cluster):
    client = login("viewer")
    html, _figures = page(client, cluster, range="1h")
    assert "아직 수신된 메트릭이 없습니다" in html and "vc-metrics-agent --url" in html
    vm = cluster.members.first()
    long_ago = timezone.now() - timedelta(hours=3)
    storage.write_samples([(vm.pk, long_ago, 1.0, 1.0, None, None, 1.0, 1.0, None, None)])
    html, figures = page(client, cluster, range="1h")
    assert "이 기간에 수신된 메트릭이 없습니다" in html and "vc-metrics-agent --url" not in html
    assert "마지막 수신" in html and timezone.localtime(long_ago).strftime("%H:%M:%S") in html
    assert not figures
    html, figures = page(client, cluster, range="24h")
    assert "마지막 수신" in html and "cpu" in figures


def test_gpu_errors_and_link_downs_become_activity_rows_and_markers(login, cluster):
    members = list(cluster.members.order_by("name"))
    minute = storage.floor_to(timezone.now(), 60) - timedelta(minutes=8)
    tasks.rollup()  # the cursor exists: the next run's minutes are "new"
    vm = members[0]
    rows, gpus, ports = [], [], []
    for k in range(6):  # one sample a minute; XID 79 from minute 2, ECC from minute 4
        at = minute + timedelta(minutes=k, seconds=5)
        rows.append((vm.pk, at, 1.0, 1.0, None, None, 1.0, 1.0, None, None))
        gpus.append(
            (
                vm.pk,
                at,
                3,
                90.0,
                *[None] * 6,
                2.0 if k >= 4 else 0.0,
                0.0,
                0.0,
                0.0,
                79.0 if k >= 2 else 0.0,
            )
        )
        ports.append((vm.pk, at, 1, 1.0, 1.0, 0.0, 1.0 if k >= 3 else 0.0, 0.0, 4.0, 400.0))
    storage.write_samples(rows, devices={"gpu": gpus, "port": ports})
    from metrics.models import RollupCursor

    RollupCursor.objects.update(upto=minute)  # as if the rollups had stopped at ``minute``
    tasks.rollup()
    tasks.rollup()  # a rerun writes nothing twice
    found = AuditEvent.objects.filter(
        target_id=vm.pk, target_type="vm", action__in=["vm.gpu_error", "vm.link_down"]
    ).order_by("code")
    assert [(e.action, e.code) for e in found] == [
        ("vm.gpu_error", "gpu_ecc_uncorrectable"),
        ("vm.gpu_error", "gpu_xid"),
        ("vm.link_down", "port_link_down"),
    ]
    xid = found.get(code="gpu_xid")
    assert (xid.params["gpu"], xid.params["xid"], xid.cluster_id) == (3, 79, cluster.pk)
    assert xid.params["at"] == int((minute + timedelta(minutes=2)).timestamp())
    client = login("viewer")
    activity = client.get(reverse("clusters:cluster_activity", args=[cluster.pk]))
    text = activity.content.decode()
    assert "GPU 3에서 XID 79 오류가 발생했습니다." in text and "패브릭 링크 끊김" in text
    _html, figures = page(client, cluster, range="1h")
    marks = next(t for t in figures["gpu"]["data"] if t.get("mode") == "markers")
    assert len(marks["x"]) == 2 and any("XID 79" in label for label in marks["text"])
    link = next(t for t in figures["fabric"]["data"] if t.get("mode") == "markers")
    assert len(link["x"]) == 1 and vm.name in link["text"][0]


def test_without_per_gpu_rows_the_slowest_member_is_named_from_the_vm_series(login, cluster):
    """Agents older than the per-GPU rows: the line still names a VM (no GPU index); six
    minutes of samples, so none of them is 방금 합류."""
    members = list(cluster.members.order_by("name"))
    now = timezone.now()
    rows = [
        (vm.pk, now - timedelta(seconds=10 * k + 3), 1.0, 1.0, util, 50.0, 1.0, 1.0, None, None)
        for vm, util in zip(members, (95.0, 61.5, 93.0), strict=True)
        for k in range(36)
    ]
    storage.write_samples(rows)
    html, figures = page(login("viewer"), cluster, range="1h")
    assert f"가장 느린 멤버: {members[1].name}</strong>" in html
    assert "최근 5분 중앙값과 -31.5%p (기준 10%p)" in html
    assert "heatmap" not in figures


def test_a_cluster_without_a_straggler_says_so(login, cluster):
    """Every GPU and port within noise of the median: no member is named, and the line says
    the cluster has none, with the criteria it was judged by."""
    members = list(cluster.members.order_by("name"))
    now = timezone.now()
    write(
        members,
        now - timedelta(minutes=20),
        now - timedelta(seconds=5),
        lambda i, g, rng: rng.uniform(88, 96) - (3.5 if i == 2 else 0),
        ports=lambda i, p: 25e9,
    )
    html, _figures = page(login("viewer"), cluster, range="1h")
    assert "가장 느린 멤버:" not in html and "가장 느린 포트:" not in html
    assert "느린 멤버 없음" in html and "모든 멤버가 최근 5분 중앙값과 10%p 이내" in html
    assert "느린 포트 없음" in html and "모든 포트가 최근 5분 중앙값과 20% 이내" in html


def test_the_criteria_are_the_clusters_validation_thresholds(login, cluster):
    """The 검증 기준 row of the cluster's instance type and fabric sets the threshold."""
    from clusters.validation.thresholds import threshold_for

    members = list(cluster.members.order_by("name"))
    now = timezone.now()
    write(
        members,
        now - timedelta(minutes=20),
        now - timedelta(seconds=5),
        lambda i, g, rng: 60.0 if (i, g) == (1, 2) else 92.0,
    )
    client = login("viewer")
    html, _figures = page(client, cluster, range="1h")
    assert f"가장 느린 멤버: {members[1].name} (GPU 2)" in html
    row = threshold_for(cluster.instance_type, cluster.fabric_type)
    row.straggler_gpu_points, row.straggler_minutes = 35.0, 8
    row.save()
    html, _figures = page(client, cluster, range="1h")
    assert "가장 느린 멤버:" not in html
    assert "모든 멤버가 최근 8분 중앙값과 35%p 이내" in html
