"""Cluster rollups: every minute and hour row, and every point of the cluster charts, equal an
aggregate computed here in Python from the raw samples (``cluster_reference``), over a history
in which a member was attached mid-range, one was replaced (교체) and one stopped reporting;
a membership change never rewrites history; late batches redo the clusters they landed in."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import services
from clusters.models import ClusterStatus
from metrics import storage
from metrics.models import ClusterHourRollup, ClusterMinuteRollup, RollupBacklog, Sample
from metrics.models.cluster import stat_columns
from metrics.storage import charts, cluster_series
from tests.metrics import cluster_reference as ref
from tests.metrics.conftest import sample
from vms.models import VmStatus

NAMES = ("cpu_util", "mem_util", "gpu_util", "gpu_mem_util", "net_rx", "net_tx")
FABRIC = ("fabric_rx", "fabric_tx")
COLUMNS = stat_columns()


class History:
    """Writes 10-second samples phase by phase, as agents would, and keeps what it wrote with
    the cluster each VM was in at that moment (the reference's input)."""

    def __init__(self, seed=7):
        self.rng = random.Random(seed)
        self.records, self.ports = [], []

    def write(self, vms, start, stop, gpu=True, lossy=True):
        rows, port_rows = [], []
        at = start
        while at < stop:
            for vm in vms:
                if lossy and self.rng.random() < 0.1:
                    continue  # a lost sample
                ts = at + timedelta(seconds=self.rng.uniform(0, 9))
                has_gpu = gpu and not vm.name.endswith("-cpu")
                values = {name: self.rng.uniform(0, 100) for name in NAMES[:4]}
                values.update(net_rx=self.rng.uniform(0, 1e9), net_tx=self.rng.uniform(0, 1e8))
                if not has_gpu:
                    values.update(gpu_util=None, gpu_mem_util=None)
                for name in FABRIC:
                    values[name] = self.rng.uniform(0, 4e10) if has_gpu else None
                rows.append((vm.pk, ts, *(values[n] for n in (*NAMES, *FABRIC))))
                self.records.append((vm.pk, ts, vm.cluster_id, values))
                if has_gpu:
                    for port in range(2):
                        rate = 400.0 if port == 0 else self.rng.choice((200.0, 400.0))
                        port_rows.append((vm.pk, ts, port, 1e9, 1e9, 0.0, 0.0, 0.0, 4.0, rate))
                        self.ports.append((vm.pk, ts, port, rate))
            at += timedelta(seconds=10)
        storage.write_samples(rows, devices={"port": port_rows})


def refresh(*vms):
    for vm in vms:
        vm.refresh_from_db()


@pytest.fixture
def history(world):
    """Cluster ``train`` over ~3 hours: a, b-cpu (no GPU), r, t from the start; d (running
    alone until then) attached at +50 min; r replaced by spare s at +95 min (r then runs
    alone); t silent from +150 min. ``other``'s member x reports all along."""
    now = timezone.now()
    base = storage.floor_to(now, 3600) - timedelta(hours=3)
    cluster = world.cluster("train", status=ClusterStatus.RUNNING)
    other = world.cluster("other", status=ClusterStatus.RUNNING)
    a, b, r, t = (
        world.vm(f"train-{n}", cluster=cluster, status=VmStatus.RUNNING, node_rank=i)
        for i, n in enumerate(("a", "b-cpu", "r", "t"))
    )
    d = world.vm("loose-d", status=VmStatus.RUNNING)
    s = world.vm("spare-s", status=VmStatus.STOPPED)
    x = world.vm("other-x", cluster=other, status=VmStatus.RUNNING)
    h = History()
    h.write([a, b, r, t, d, x], base, base + timedelta(minutes=50))
    services.join(d, cluster)
    h.write([a, b, r, t, d, x], base + timedelta(minutes=50), base + timedelta(minutes=95))
    services.join(s, cluster, rank=r.node_rank)  # 교체: the spare takes r's rank, r leaves
    services.leave(r)
    refresh(a, b, r, t, d, s, x)
    assert r.cluster_id is None and s.cluster_id == cluster.pk
    h.write([a, b, t, d, s, r, x], base + timedelta(minutes=95), base + timedelta(minutes=150))
    h.write([a, b, d, s, r, x], base + timedelta(minutes=150), now - timedelta(minutes=3))
    h.now, h.cluster, h.other = now, cluster, other
    h.vms = {"a": a, "b": b, "r": r, "t": t, "d": d, "s": s, "x": x}
    return h


def stored_rows(model, upto):
    rows = {}
    for row in model.objects.filter(bucket__lt=upto).values("cluster_id", "bucket", *COLUMNS):
        key = (row.pop("cluster_id"), int(row.pop("bucket").timestamp()))
        rows[key] = row
    return rows


def assert_rows_equal(got, want):
    assert set(got) == set(want)
    for key, row in want.items():
        for column, value in row.items():
            stored = got[key][column]
            if value is None or stored is None:
                assert stored == value, (key, column)
            else:
                assert stored == pytest.approx(value, rel=1e-9, abs=1e-6), (key, column)


def rolled(history):
    storage.rollup(history.now)
    upto = storage.floor_to(history.now - storage.rollups.CLOSE_GRACE, 60)
    return upto


def assert_rows_match_the_reference(history, upto):
    """Every stored cluster minute row before ``upto`` and hour row before its hour equals
    the reference's; returns the number of hours compared."""
    minutes = {
        key: row
        for key, row in ref.minute_rows(history.records, history.ports).items()
        if key[1] < upto.timestamp()
    }
    assert_rows_equal(stored_rows(ClusterMinuteRollup, upto), minutes)
    hour_upto = storage.floor_to(upto, 3600)
    hours = {k: v for k, v in ref.hour_rows(minutes).items() if k[1] < hour_upto.timestamp()}
    assert_rows_equal(stored_rows(ClusterHourRollup, hour_upto), hours)
    return len({hour for _cluster, hour in hours})


def test_minute_and_hour_rows_equal_the_raw_samples_aggregated_here(history):
    # Three whole hours; two when this runs in an hour's first 20 seconds.
    assert assert_rows_match_the_reference(history, rolled(history)) >= 2


def test_a_bucket_counts_the_members_that_reported_in_it_as_members(history):
    """d counts only once attached, r only until replaced, s from then on, t until it went
    silent: the members per minute are what the history says, phase by phase."""
    rolled(history)
    c, base = history.cluster.pk, storage.floor_to(history.now, 3600) - timedelta(hours=3)
    peaks = dict(
        ClusterMinuteRollup.objects.filter(cluster_id=c).values_list("bucket", "members_peak")
    )
    expected_max = [(0, 50, 4), (50, 95, 5), (95, 150, 5), (150, 170, 4)]
    for first, last, members in expected_max:
        seen = [
            peaks[base + timedelta(minutes=m)]
            for m in range(first + 1, last - 1)
            if base + timedelta(minutes=m) in peaks
        ]
        assert seen and max(seen) == members, (first, last, seen)
    # No minute of d's before it joined, none of r's after it left, none of x's.
    d_alone = history.vms["d"].pk
    assert not any(
        cluster == c and ts < base + timedelta(minutes=50)
        for vm_id, ts, cluster, _v in history.records
        if vm_id == d_alone
    )


@pytest.mark.parametrize("range_key", ["1h", "6h", "24h", "7d"])
def test_chart_lines_equal_the_reference_before_and_after_the_rollups(history, range_key):
    """From raw samples alone (nothing rolled up), then from the rollups (hours, minutes and
    the raw tail): the same points, equal to the reference, for every series."""
    before = charts.chart_data(history.cluster, range_key, now=history.now)
    rolled(history)
    after = charts.chart_data(history.cluster, range_key, now=history.now)
    step = after.step
    assert step == charts.RANGES[range_key].cluster[1] == before.step
    want = ref.chart(history.records, history.cluster.pk, step, history.ports)
    compared = set()
    for data in (before, after):
        for index in range(data.points):
            bucket = data.first_bucket + index
            for name in cluster_series.NAMES:
                got = data.series[name][index]
                expected = want.get(bucket, {}).get(name)
                if data is before and name == "link_gbps":
                    continue  # link rates come from the port rollups only
                if expected is None:
                    assert got is None, (bucket, name, got)
                else:
                    assert got == pytest.approx(expected, rel=1e-9, abs=1e-6), (bucket, name)
                    compared.add(bucket)
    # Not a vacuous pass: the window holds buckets of the history, at 7d its three whole hours
    # (a count of compared values depended on the minute of the hour the test ran in).
    assert len(compared) >= 3


def test_a_membership_change_after_the_fact_rewrites_nothing(history):
    """Detaching members and redoing every minute of their history (as a late batch does)
    leaves every cluster row as it was."""
    upto = rolled(history)
    minutes = stored_rows(ClusterMinuteRollup, upto)
    hours = stored_rows(ClusterHourRollup, upto)
    for name in ("a", "d", "s"):
        services.leave(history.vms[name])
    start = storage.floor_to(history.now, 3600) - timedelta(hours=3)
    for name in ("a", "d", "r", "s"):
        RollupBacklog.objects.create(vm_id=history.vms[name].pk, start=start, end=history.now)
    storage.rollup(history.now)
    assert not RollupBacklog.objects.exists()
    assert_rows_equal(stored_rows(ClusterMinuteRollup, upto), minutes)
    assert_rows_equal(stored_rows(ClusterHourRollup, upto), hours)


def test_a_late_batch_redoes_its_clusters_minutes_and_hours(history):
    upto = rolled(history)
    a = history.vms["a"]
    late_start = storage.floor_to(history.now, 3600) - timedelta(hours=2, minutes=30)
    # Samples a missed (a lost batch, re-sent): off the 10-second grid it used.
    before = len(history.records)
    history.rng = random.Random(99)
    history.write([a], late_start + timedelta(seconds=5), late_start + timedelta(minutes=7))
    micros = [storage.micros_of(ts) for _vm, ts, _c, _v in history.records[before:]]
    assert storage.late_batch(a.pk, micros, history.now.timestamp()) is not None
    RollupBacklog.objects.create(
        vm_id=a.pk, start=late_start, end=late_start + timedelta(minutes=7)
    )
    storage.rollup(history.now)
    assert assert_rows_match_the_reference(history, upto) >= 2


def test_samples_are_stamped_with_the_cluster_of_the_moment_on_every_write_path(
    world, token, running_vm, post
):
    """The token's one-statement insert, the small insert, COPY (a large and a late batch)
    all stamp each row with the VM's cluster at that moment."""
    cluster = world.cluster("stamp", status=ClusterStatus.RUNNING)
    services.join(running_vm, cluster)
    now = timezone.now()
    seconds = now.timestamp()
    assert post(token, {"samples": [sample(seconds - 2)]}).status_code == 200  # one statement
    storage.write_samples(
        [(running_vm.pk, now - timedelta(seconds=30 + i), *[1.0] * 6, None, None) for i in range(3)]
    )  # the small insert
    many = [sample(seconds - 7200 + i) for i in range(40)]
    assert post(token, {"samples": many}).status_code == 200  # COPY
    assert post(token, {"samples": [sample(seconds - 3600)]}).status_code == 200  # late: COPY
    services.leave(running_vm)
    assert post(token, {"samples": [sample(seconds - 1)]}).status_code == 200
    stamps = list(Sample.objects.filter(vm=running_vm).order_by("ts").values_list("cluster_id"))
    assert stamps == [(cluster.pk,)] * 45 + [(None,)]
