"""Minute and hour rollups of the raw samples, recomputed by upsert.

Each range is recomputed from the rows below it with one ``INSERT … SELECT … GROUP BY …
ON CONFLICT DO UPDATE``, so a rerun over the same buckets is harmless: a beat task can retry,
overlap or run late. A batch that lands in buckets already rolled up (an agent's backlog)
queues its range in ``RollupBacklog``, redone on the next run. Every series (the per-VM one
and the per-GPU and per-port ones, ``metrics.models.SERIES``) is rolled up the same way, by
its keys; the host series' minute rows also keep the cluster their samples were stamped
with, and each run then redoes the cluster rollups of the same minutes and hours
(``cluster_rollup``). After each run the new minutes are scanned for device errors
(``events``).
"""

from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from metrics import conf
from metrics.models import HOST, SERIES, RollupBacklog, RollupCursor
from metrics.storage import cluster_rollup
from metrics.storage.db import MICROS_PER_SECOND, bucket_sql, datetime_of, param

# A minute is closed (rolled up) this long after it ends: agents send every ~10 s.
CLOSE_GRACE = timedelta(seconds=20)
# Each rollup run also redoes this much before its cursor, for samples that came in late
# (an agent that retried a few times). Older late batches are queued in RollupBacklog.
LATE_WINDOW = timedelta(minutes=5)
# One transaction rolls up at most this much (a first run over a week of data).
ROLLUP_CHUNK = timedelta(hours=6)
CURSOR = "rollups"


def floor_to(moment: datetime, seconds: int) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def is_late(first_micros: int, now: float) -> bool:
    """Whether a batch starting at ``first_micros`` may be older than the rollups' late
    window (``now`` in Unix seconds), so that its buckets must be redone."""
    late_after = (LATE_WINDOW - timedelta(minutes=1)).total_seconds()
    return first_micros < (now - late_after) * MICROS_PER_SECOND


def late_batch(vm_id: int, micros: list[int], now: float) -> RollupBacklog | None:
    """A ``RollupBacklog`` (unsaved) for a late batch at ``micros``, to be written with the
    batch; None for a batch on time."""
    first, last = min(micros), max(micros)
    if not is_late(first, now):
        return None
    return RollupBacklog(vm_id=vm_id, start=datetime_of(first), end=datetime_of(last))


def _rollup_columns(series):
    return ["n"] + [f"{name}_{kind}" for name in series.names for kind in ("avg", "max")]


def _upsert_sql(series, table, select_sql, stamped=False):
    columns = _rollup_columns(series)
    keys = ", ".join(series.keys)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns)
    if stamped:
        # A minute recomputed from samples written before they were stamped keeps its stamp.
        columns.append("cluster_id")
        updates += f", cluster_id = COALESCE(excluded.cluster_id, {table}.cluster_id)"
    return (
        f"INSERT INTO {table} ({keys}, bucket, {', '.join(columns)}) {select_sql} "
        f"ON CONFLICT ({keys}, bucket) DO UPDATE SET {updates}"
    )


def roll_minutes(start: datetime, stop: datetime, vm_id: int | None = None) -> None:
    """(Re)compute the minute rollups of [start, stop) from raw samples, every series; a
    host minute takes its samples' cluster stamp (if a VM changed cluster within a minute,
    which takes a stop, a detach, an attach and a start, the minute counts for the larger id)."""
    for series in SERIES:
        aggregates = ", ".join(f"avg({n}), max({n})" for n in series.names)
        if series is HOST:
            aggregates += ", max(cluster_id)"
        _upsert(
            series,
            series.minute,
            f"{bucket_sql('ts', 'minute')} AS b, count(*), {aggregates}",
            series.raw,
            "ts",
            start,
            stop,
            vm_id,
        )


def roll_hours(start: datetime, stop: datetime, vm_id: int | None = None) -> None:
    """(Re)compute the hour rollups of [start, stop) from the minute rollups.

    An hour's average weights each minute by its sample count, which is exact as long as a
    VM reports a nullable metric (GPU, fabric) in all or none of a minute's samples.
    """
    for series in SERIES:
        parts = []
        for name, nullable, *_range in series.fields:
            weight = f"CASE WHEN {name}_avg IS NOT NULL THEN n END" if nullable else "n"
            parts.append(f"sum({name}_avg * n) / sum({weight}), max({name}_max)")
        _upsert(
            series,
            series.hour,
            f"{bucket_sql('bucket', 'hour')} AS b, sum(n), {', '.join(parts)}",
            series.minute,
            "bucket",
            start,
            stop,
            vm_id,
        )


def _upsert(series, target, aggregates, source, time_column, start, stop, vm_id):
    """Upsert ``target``'s rows from ``source``'s over [start, stop), of one VM or all."""
    stamped = series is HOST and target is series.minute
    where = f"{time_column} >= %s AND {time_column} < %s"
    params = [param(start), param(stop)]
    if vm_id is not None:
        where += " AND vm_id = %s"
        params.append(vm_id)
    keys = ", ".join(series.keys)
    select = (
        f"SELECT {keys}, {aggregates} FROM {source._meta.db_table} WHERE {where} GROUP BY {keys}, b"  # noqa: S608 - names from the models and constants; values are parameters
    )
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(series, target._meta.db_table, select, stamped), params)


def _locked_cursor(end):
    initial = floor_to(end - timedelta(seconds=conf.get("METRICS_MAX_AGE_SECONDS")), 3600)
    RollupCursor.objects.get_or_create(name=CURSOR, defaults={"upto": initial})
    return RollupCursor.objects.select_for_update().get(name=CURSOR)


def rollup(now: datetime | None = None) -> int:
    """Roll up every closed minute and hour up to ``now``; returns the minutes advanced.

    The cursor row is locked for each chunk, so concurrent runs take turns. Each chunk also
    redoes ``LATE_WINDOW`` before the cursor (samples a few intervals late); hours are
    recomputed once their last minute is in, and again while late minutes may still land.
    """
    now = now or timezone.now()
    end = floor_to(now - CLOSE_GRACE, 60)
    advanced = 0
    while True:
        with transaction.atomic():
            cursor = _locked_cursor(end)
            if cursor.upto >= end:
                break
            start = cursor.upto - LATE_WINDOW
            stop = min(cursor.upto + ROLLUP_CHUNK, end)
            roll_minutes(start, stop)
            cluster_rollup.roll_minutes(start, stop)
            hours_from, hours_to = floor_to(start, 3600), floor_to(stop, 3600)
            if hours_from < hours_to:
                roll_hours(hours_from, hours_to)
                cluster_rollup.roll_hours(hours_from, hours_to)
            advanced += int((stop - cursor.upto).total_seconds() // 60)
            cursor.upto = stop
            cursor.save(update_fields=["upto"])
    roll_backlog()
    return advanced


def roll_backlog() -> int:
    """Redo the closed buckets that late batches landed in, then forget those batches."""
    with transaction.atomic():
        cursor = RollupCursor.objects.select_for_update().filter(name=CURSOR).first()
        if cursor is None:
            return 0  # nothing rolled up yet: the normal run will get every batch
        entries = list(RollupBacklog.objects.order_by("id")[:200])
        redo = cluster_rollup.Redo()
        for entry in entries:
            start = floor_to(entry.start, 60)
            stop = min(floor_to(entry.end, 60) + timedelta(minutes=1), cursor.upto)
            if start >= stop:
                continue  # not rolled up yet: the normal run will get it
            # The clusters the VM's minutes counted for, before and after: a late sample
            # with another stamp moves a minute from one to the other.
            clusters = cluster_rollup.clusters_of(entry.vm_id, start, stop)
            roll_minutes(start, stop, vm_id=entry.vm_id)
            clusters |= cluster_rollup.clusters_of(entry.vm_id, start, stop)
            redo.add(clusters, start, stop)
            hours_to = min(
                floor_to(stop - timedelta(microseconds=1), 3600) + timedelta(hours=1),
                floor_to(cursor.upto, 3600),
            )
            if floor_to(start, 3600) < hours_to:
                roll_hours(floor_to(start, 3600), hours_to, vm_id=entry.vm_id)
        redo.run(floor_to(cursor.upto, 3600))
        RollupBacklog.objects.filter(pk__in=[e.pk for e in entries]).delete()
    return len(entries)
