"""Rollups against a hand-computed example, late batches, partitions and retention."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from metrics import errors, storage
from metrics.models import METRIC_NAMES, HourRollup, MinuteRollup, RollupBacklog, Sample

NAMES = METRIC_NAMES


def row(vm, at, cpu, gpu=None, net_rx=0.0):
    """A raw row: only cpu, gpu and net_rx vary; the rest are fixed."""
    values = {
        "cpu_util": cpu,
        "mem_util": 40.0,
        "gpu_util": gpu,
        "gpu_mem_util": None if gpu is None else 50.0,
        "net_rx": net_rx,
        "net_tx": 1.0,
        "fabric_rx": None,
        "fabric_tx": None,
    }
    return (vm.pk, at, *(values[name] for name in NAMES))


@pytest.fixture
def hour():
    """The start of an hour three hours ago."""
    return storage.floor_to(timezone.now(), 3600) - timedelta(hours=3)


@pytest.fixture
def example(world, hour):
    a, b = world.vm("roll-a"), world.vm("roll-b")
    s = lambda minutes, seconds=0: hour + timedelta(minutes=minutes, seconds=seconds)  # noqa: E731
    storage.write_samples(
        [
            row(a, s(0, 5), 10, gpu=90, net_rx=100),
            row(a, s(0, 15), 20, gpu=80, net_rx=300),
            row(a, s(0, 25), 60, gpu=100, net_rx=200),
            row(a, s(1, 0), 50, gpu=None, net_rx=1000),  # the GPU was gone for that whole minute
            row(a, s(59, 50), 40, gpu=60, net_rx=0),
            row(a, s(60, 10), 99, gpu=10, net_rx=0),  # next hour: not closed at "now"
            row(b, s(0, 30), 5),  # a VM without GPU
        ]
    )
    return a, b


def minute(vm, at):
    return MinuteRollup.objects.get(vm=vm, bucket=at)


def test_minute_and_hour_rollups_match_the_hand_computed_example(example, hour):
    a, b = example
    storage.rollup(now=hour + timedelta(minutes=61, seconds=30))

    first = minute(a, hour)
    assert (first.n, first.cpu_util_avg, first.cpu_util_max) == (3, 30.0, 60.0)
    assert (first.gpu_util_avg, first.gpu_util_max) == (90.0, 100.0)
    assert (first.net_rx_avg, first.net_rx_max) == (200.0, 300.0)
    second = minute(a, hour + timedelta(minutes=1))
    assert (second.n, second.cpu_util_avg, second.gpu_util_avg, second.gpu_util_max) == (
        1,
        50.0,
        None,
        None,
    )
    assert minute(a, hour + timedelta(minutes=60)).cpu_util_avg == 99.0  # closed at :61:10
    assert minute(b, hour).gpu_util_avg is None
    assert MinuteRollup.objects.filter(vm=a).count() == 4

    h = HourRollup.objects.get(vm=a, bucket=hour)
    assert h.n == 5
    assert h.cpu_util_avg == pytest.approx((10 + 20 + 60 + 50 + 40) / 5)  # 36
    assert h.cpu_util_max == 60.0
    assert h.gpu_util_avg == pytest.approx((90 + 80 + 100 + 60) / 4)  # nulls not counted
    assert h.gpu_util_max == 100.0
    assert h.net_rx_avg == pytest.approx((100 + 300 + 200 + 1000 + 0) / 5)  # 320
    assert h.net_rx_max == 1000.0
    assert HourRollup.objects.get(vm=b, bucket=hour).gpu_util_avg is None
    assert not HourRollup.objects.filter(bucket=hour + timedelta(hours=1)).exists()


def test_rollup_is_idempotent_and_catches_up_later(example, hour):
    now = hour + timedelta(minutes=61, seconds=30)
    storage.rollup(now=now)
    before = list(MinuteRollup.objects.order_by("vm_id", "bucket").values())
    assert storage.rollup(now=now) == 0
    assert list(MinuteRollup.objects.order_by("vm_id", "bucket").values()) == before
    # An hour later the next hour closes.
    storage.rollup(now=now + timedelta(hours=1))
    next_hour = HourRollup.objects.get(vm=example[0], bucket=hour + timedelta(hours=1))
    assert next_hour.cpu_util_avg == 99


def test_a_few_seconds_late_sample_is_picked_up_by_the_next_run(example, hour):
    a, _b = example
    storage.rollup(now=hour + timedelta(minutes=61, seconds=30))
    storage.write_samples([row(a, hour + timedelta(minutes=60, seconds=50), 1)])
    storage.rollup(now=hour + timedelta(minutes=62, seconds=30))
    assert minute(a, hour + timedelta(minutes=60)).cpu_util_avg == 50.0


def test_a_late_backlog_batch_is_rolled_up_again(example, hour):
    a, _b = example
    now = hour + timedelta(minutes=61, seconds=30)
    storage.rollup(now=now)
    late = hour + timedelta(seconds=45)
    backlog = storage.late_batch(a.pk, [storage.micros_of(late)], now.timestamp())
    storage.write_samples([row(a, late, 100, gpu=90)], backlog)
    assert RollupBacklog.objects.count() == 1
    storage.rollup(now=now + timedelta(minutes=1))
    assert RollupBacklog.objects.count() == 0
    assert (minute(a, hour).n, minute(a, hour).cpu_util_avg) == (4, 47.5)
    assert HourRollup.objects.get(vm=a, bucket=hour).cpu_util_avg == pytest.approx(280 / 6)


def test_a_recent_batch_is_not_queued_as_backlog(world):
    now = timezone.now()
    now = now.timestamp()
    assert storage.late_batch(1, storage.to_micros([now - 30, now]), now) is None


def test_duplicate_sample_raises_and_stores_nothing(world):
    vm = world.vm("dup")
    at = timezone.now()
    storage.write_samples([row(vm, at, 1)])
    with pytest.raises(errors.Duplicate):
        storage.write_samples([row(vm, at + timedelta(seconds=10), 2), row(vm, at, 3)])
    assert Sample.objects.filter(vm=vm).count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="partitions are PostgreSQL-only")
def test_partitions_are_made_ahead_and_dropped_by_retention(world, settings):
    settings.METRICS_RAW_RETENTION_DAYS = 8
    now = datetime(2031, 3, 15, 12, tzinfo=UTC)
    old_day = (now - timedelta(days=10)).date()
    storage.ensure_partitions({old_day})
    vm = world.vm("part")
    storage.write_samples([row(vm, now - timedelta(days=10), 1)])
    created, dropped = storage.maintain(now)
    days = set(storage.existing_partitions())
    assert {(now + timedelta(days=d)).date() for d in range(-7, 3)} <= days
    assert old_day not in days and dropped >= 1
    assert created >= 10
    assert not Sample.objects.filter(vm=vm).exists()
    # A sample for a day that has no partition yet still lands (created on demand).
    storage.write_samples([row(vm, now + timedelta(days=5), 1)])
    assert (now + timedelta(days=5)).date() in storage.existing_partitions()


@pytest.mark.skipif(connection.vendor == "postgresql", reason="plain table elsewhere")
def test_retention_deletes_old_rows_without_partitions(world):
    vm = world.vm("old")
    now = timezone.now()
    storage.write_samples([row(vm, now - timedelta(days=9), 1), row(vm, now, 2)])
    storage.maintain(now)
    assert list(Sample.objects.filter(vm=vm).values_list("cpu_util", flat=True)) == [2.0]


def test_rollup_retention(world):
    vm = world.vm("r")
    now = timezone.now()
    fields = {f"{n}_{k}": 1.0 for n in NAMES for k in ("avg", "max")}
    MinuteRollup.objects.create(vm=vm, bucket=now - timedelta(days=9), n=1, **fields)
    MinuteRollup.objects.create(vm=vm, bucket=now - timedelta(days=1), n=1, **fields)
    HourRollup.objects.create(vm=vm, bucket=now - timedelta(days=9), n=1, **fields)
    storage.drop_expired(now)
    assert MinuteRollup.objects.count() == 1 and HourRollup.objects.count() == 1


@pytest.mark.parametrize("mixed", [False, True])
def test_write_batch_stores_exactly_what_was_sent(world, mixed):
    """The ingest path packs big batches into COPY's binary format by hand on PostgreSQL
    (a column mixing values and nulls is packed field by field): both store the same."""
    vm = world.vm("batch")
    base = timezone.now().timestamp() - 100
    n = 12
    columns = [
        storage.to_micros(base + i + 0.123456 for i in range(n)),
        [float(i) for i in range(n)],  # cpu
        [50] * n,  # mem, as JSON integers
        [99.5] * n,  # gpu
        [10.25] * n,  # gpu mem
        [1e9 + i for i in range(n)],
        [0.0] * n,
        [None] * n,  # no fabric on this VM
        [None if mixed and i == 3 else 7.5 for i in range(n)],
    ]
    storage.write_batch(vm.pk, columns)
    stored = list(Sample.objects.filter(vm=vm).order_by("ts").values_list("ts", *NAMES))
    assert len(stored) == n
    for i, (ts, *values) in enumerate(stored):
        assert storage.micros_of(ts) == columns[0][i]
        assert values == [columns[c][i] for c in range(1, 9)]
    with pytest.raises(errors.Duplicate):
        storage.write_batch(vm.pk, columns)
