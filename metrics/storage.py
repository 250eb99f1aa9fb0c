"""Where samples go: bulk writes, day partitions, rollups and retention (SPEC §7).

Raw samples are written by COPY on PostgreSQL (FIELD-NOTES: binary COPY is ~6x an
``executemany``) and by ``bulk_create`` elsewhere. Rollups are recomputed from the rows
below them with one ``INSERT … SELECT … GROUP BY … ON CONFLICT DO UPDATE`` per range, so a
rerun over the same buckets is harmless: a beat task can retry, overlap or run late.
"""

import struct
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from itertools import repeat

import psycopg
from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.utils import timezone

from metrics import conf
from metrics.models import (
    METRIC_FIELDS,
    METRIC_NAMES,
    HourRollup,
    MinuteRollup,
    RollupBacklog,
    RollupCursor,
    Sample,
)

COLUMNS = ("vm_id", "ts", *METRIC_NAMES)
PG_TYPES = ["int8", "timestamptz", *["float8"] * len(METRIC_NAMES)]
COPY_SQL = f"COPY metrics_sample ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)"
PARTITION_PREFIX = "metrics_sample_p"

# A minute is closed (rolled up) this long after it ends: agents send every ~10 s.
CLOSE_GRACE = timedelta(seconds=20)
# Each rollup run also redoes this much before its cursor, for samples that came in late
# (an agent that retried a few times). Older late batches are queued in RollupBacklog.
LATE_WINDOW = timedelta(minutes=5)
# One transaction rolls up at most this much (a first run over a week of data).
ROLLUP_CHUNK = timedelta(hours=6)
CURSOR = "rollups"


class DuplicateSamples(Exception):
    """The batch holds a (vm, ts) already stored: the agent re-sent a batch that had landed."""


def is_postgresql():
    return connection.vendor == "postgresql"


def _sqlstate(exc):
    return getattr(exc.__cause__, "sqlstate", None)


# ---------------------------------------------------------------------------------------------
# Writing raw samples


def write_samples(rows, backlog=None):
    """Store ``rows`` (tuples in ``COLUMNS`` order, ``ts`` an aware datetime) all or none, and
    with them ``backlog`` (an unsaved ``RollupBacklog`` for a late batch) if given.

    Raises ``DuplicateSamples`` if any (vm_id, ts) is already stored. A missing day
    partition (beat not run yet, or a fresh database) is created and the write retried once.
    """
    _with_partitions(lambda: _write(rows, backlog), lambda: {row[1] for row in rows})


def write_batch(vm_id, columns, backlog=None):
    """``write_samples`` for one VM's validated batch given as columns (``ts`` first, in Unix
    seconds, then ``METRIC_NAMES``): the ingest endpoint's path.

    A large batch on PostgreSQL is packed into COPY's binary format here, one ``struct``
    call per row, rather than turned into datetimes and tuples for psycopg's ``write_row``:
    a third of the Python time of a 1,000-sample batch.
    """
    if is_postgresql() and len(columns[0]) > SMALL_BATCH:
        data = _pack_binary(vm_id, columns)
        if data is not None:
            stamps = (_to_datetime(min(columns[0])), _to_datetime(max(columns[0])))
            _with_partitions(lambda: _copy(data, backlog), lambda: _days_between(*stamps))
            return
    rows = list(zip(repeat(vm_id), map(_to_datetime, columns[0]), *columns[1:], strict=False))
    write_samples(rows, backlog)


def write_for_token(token_hash, claimed_vm, columns, now):
    """Store a small, on-time batch for the VM of ``token_hash`` in one statement.

    Returns True when stored; False when this path does not apply (not PostgreSQL, a large
    or late batch) or the statement inserted nothing (unknown token, deleted VM, ``claimed_vm``
    not the token's): the caller then takes the ordinary path, which says which.
    """
    count = len(columns[0])
    if not is_postgresql() or count > SMALL_BATCH:
        return False
    if late_batch(None, min(columns[0]), max(columns[0]), now) is not None:
        return False
    params = [value for row in zip(map(_to_datetime, columns[0]), *columns[1:], strict=False)
              for value in row]
    params += [token_hash, claimed_vm, claimed_vm]
    inserted = []

    def write():
        scope = transaction.atomic() if connection.in_atomic_block else nullcontext()
        connection.ensure_connection()
        with scope, connection.wrap_database_errors:
            with psycopg.Cursor(connection.connection) as cursor:
                cursor.execute(_INSERT_FOR_TOKEN[count], params, prepare=True)
                inserted.append(cursor.rowcount)

    _with_partitions(write, lambda: map(_to_datetime, columns[0]))
    return inserted[-1] == count


def _with_partitions(write, moments):
    try:
        write()
    except IntegrityError as exc:
        if not (is_postgresql() and _sqlstate(exc) == "23514"):  # no partition for the row
            raise DuplicateSamples() from exc
        ensure_partitions({moment.astimezone(UTC).date() for moment in moments()})
        try:
            write()
        except IntegrityError as again:
            raise DuplicateSamples() from again


def _days_between(first, last):
    day, days = first, []
    while day.date() <= last.date():
        days.append(day)
        day += timedelta(days=1)
    return days + [last]


def _to_datetime(seconds):
    return datetime.fromtimestamp(seconds, tz=UTC)


# Samples are telemetry: they commit asynchronously (synchronous_commit = off, for these
# transactions only). A PostgreSQL crash may lose the last fraction of a second of
# acknowledged samples, never consistency; in exchange no ingest request waits for a WAL
# flush, which otherwise dominates a one-sample request.
SMALL_BATCH = 5  # rows; one INSERT of at most 50 parameters (psycopg caches its parse)
# Typed: in a VALUES list a NULL would otherwise be text.
_ROW_PLACEHOLDERS = "(" + ", ".join(f"%s::{pg_type}" for pg_type in PG_TYPES) + ")"
_INSERT_ASYNC = {
    n: f"INSERT INTO metrics_sample ({', '.join(COLUMNS)}) SELECT v.* "
    # set_config(..., true) lasts until the end of this statement's own transaction, whose
    # commit it makes asynchronous: one round trip, no BEGIN/SET/COMMIT.
    "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit, "
    f"(VALUES {', '.join([_ROW_PLACEHOLDERS] * n)}) AS v"
    for n in range(1, SMALL_BATCH + 1)
}
# The same, for the ingest endpoint's common case: the token is checked in the statement
# itself (no row is inserted for an unknown token, a deleted VM or another VM's id), so an
# on-time agent batch costs one round trip, like the lightest authenticated request.
_INSERT_FOR_TOKEN = {
    n: f"INSERT INTO metrics_sample ({', '.join(COLUMNS)}) SELECT t.vm_id, v.* "
    "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit, "
    "metrics_metricstoken t JOIN vms_virtualmachine vm ON vm.id = t.vm_id, "
    f"(VALUES {', '.join(['(' + ', '.join(f'%s::{t}' for t in PG_TYPES[1:]) + ')'] * n)}) AS v "
    "WHERE t.token_hash = %s AND vm.status <> 'DELETED' AND (%s::int8 IS NULL OR t.vm_id = %s)"
    for n in range(1, SMALL_BATCH + 1)
}
# COPY's binary format: signature, flags, header extension; then rows; then -1.
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = struct.pack("!h", -1)
_PG_EPOCH = 946684800  # 2000-01-01 in Unix seconds: binary timestamptz counts µs from it


def _pack_binary(vm_id, columns):
    """COPY binary data for the batch, or None if a column mixes values and nulls (rare: a GPU
    lost mid-batch), which ``write_row`` then handles."""
    fields = ["!h", "iq", "iq"]  # field count; vm_id; ts (length-prefixed int64s)
    # Microseconds since 2000, by C-level bound methods rather than a Python loop.
    micros = map(round, map((1e6).__mul__, map((-float(_PG_EPOCH)).__add__, columns[0])))
    args = [repeat(len(COLUMNS)), repeat(8), repeat(vm_id), repeat(8), micros]
    for column in columns[1:]:
        nulls = column.count(None)
        if nulls == len(column):
            fields.append("i")
            args.append(repeat(-1))  # NULL: length -1, no data
        elif nulls:
            return None
        else:
            fields.append("id")
            args += [repeat(8), column]
    row = struct.Struct("".join(fields))
    return b"".join((_COPY_SIGNATURE, *map(row.pack, *args), _COPY_TRAILER))


def _copy(data, backlog):
    with transaction.atomic(), connection.cursor() as cursor:
        _async_commit(cursor, backlog)
        with connection.wrap_database_errors, cursor.cursor.copy(COPY_SQL) as copy:
            copy.write(data)


def _async_commit(cursor, backlog):
    """Make this transaction's commit asynchronous, and note ``backlog`` if any, in one
    statement (one round trip fewer than SET LOCAL and an INSERT)."""
    if backlog is None:
        cursor.execute("SET LOCAL synchronous_commit = off")
        return
    cursor.execute(
        f"INSERT INTO {RollupBacklog._meta.db_table} (vm_id, start, \"end\") "
        "SELECT %s, %s, %s FROM (SELECT set_config('synchronous_commit', 'off', true)) AS s",
        [backlog.vm_id, backlog.start, backlog.end],
    )


def _write(rows, backlog):
    if not is_postgresql():
        with transaction.atomic():
            Sample.objects.bulk_create(
                Sample(**dict(zip(COLUMNS, row, strict=True))) for row in rows
            )
            if backlog is not None:
                backlog.save()
        return
    if len(rows) <= SMALL_BATCH and backlog is None:
        # One statement is atomic by itself; inside a caller's transaction a savepoint keeps
        # that transaction usable if it fails.
        sql = _INSERT_ASYNC[len(rows)]
        scope = transaction.atomic() if connection.in_atomic_block else nullcontext()
        connection.ensure_connection()
        with scope, connection.wrap_database_errors:
            # Server-side binding and a statement prepared once per (pooled) connection:
            # Django's own cursors bind client-side, re-parsed and re-planned on every call.
            with psycopg.Cursor(connection.connection) as cursor:
                cursor.execute(sql, [value for row in rows for value in row], prepare=True)
        return
    with transaction.atomic(), connection.cursor() as cursor:
        _async_commit(cursor, backlog)
        with connection.wrap_database_errors, cursor.cursor.copy(COPY_SQL) as copy:
            copy.set_types(PG_TYPES)
            for row in rows:
                copy.write_row(row)


# ---------------------------------------------------------------------------------------------
# Day partitions (PostgreSQL only)


def partition_name(day):
    return f"{PARTITION_PREFIX}{day:%Y%m%d}"


def ensure_partitions(days):
    """Create the day partitions of ``days`` (UTC dates) that do not exist yet."""
    if not is_postgresql():
        return
    for day in sorted(days):
        lower = datetime(day.year, day.month, day.day, tzinfo=UTC)
        upper = lower + timedelta(days=1)
        sql = (
            f"CREATE TABLE IF NOT EXISTS {partition_name(day)} PARTITION OF metrics_sample "
            f"FOR VALUES FROM ('{lower.isoformat()}') TO ('{upper.isoformat()}')"
        )
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql)
        except (ProgrammingError, IntegrityError) as exc:
            # Another process created it between IF NOT EXISTS and the catalog insert.
            if _sqlstate(exc) not in {"42P07", "23505"}:
                raise


def existing_partitions():
    """{UTC date: partition name} of the day partitions that exist."""
    if not is_postgresql():
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'metrics_sample'::regclass"
        )
        names = [name for (name,) in cursor.fetchall()]
    found = {}
    for name in names:
        if name.startswith(PARTITION_PREFIX):
            found[datetime.strptime(name[len(PARTITION_PREFIX):], "%Y%m%d").date()] = name
    return found


def maintain(now=None):
    """Create partitions for every day a sample may be accepted for (the ingest window and a
    few days ahead), then drop what retention no longer keeps. Returns (created, dropped)."""
    now = now or timezone.now()
    today = now.astimezone(UTC).date()
    first = (now - timedelta(seconds=conf.get("METRICS_MAX_AGE_SECONDS"))).astimezone(UTC).date()
    wanted = {
        first + timedelta(days=i)
        for i in range((today - first).days + conf.get("METRICS_PARTITIONS_AHEAD_DAYS") + 1)
    }
    before = existing_partitions()
    ensure_partitions(wanted - set(before))
    dropped = drop_expired(now)
    return len(wanted - set(before)), dropped


def drop_expired(now):
    """Drop raw samples and rollups older than their retention; returns partitions dropped."""
    raw_cutoff = now - timedelta(days=conf.get("METRICS_RAW_RETENTION_DAYS"))
    dropped = 0
    if is_postgresql():
        # A day partition goes once all of it is older than the cutoff: no row-by-row delete.
        for day, name in sorted(existing_partitions().items()):
            if datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1) <= raw_cutoff:
                with connection.cursor() as cursor:
                    cursor.execute(f"DROP TABLE IF EXISTS {name}")
                dropped += 1
    else:
        Sample.objects.filter(ts__lt=raw_cutoff).delete()
    MinuteRollup.objects.filter(
        bucket__lt=now - timedelta(days=conf.get("METRICS_MINUTE_RETENTION_DAYS"))
    ).delete()
    HourRollup.objects.filter(
        bucket__lt=now - timedelta(days=conf.get("METRICS_HOUR_RETENTION_DAYS"))
    ).delete()
    return dropped


# ---------------------------------------------------------------------------------------------
# Rollups


def floor_to(moment, seconds):
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def _bucket_sql(column, unit):
    if is_postgresql():
        return f"date_trunc('{unit}', {column})"
    # SQLite keeps datetimes as 'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC.
    # %% because the statement goes through Django's %s-parameter formatting (and, under
    # DEBUG, through ``sql % params`` for the query log).
    pattern = {"minute": "%%Y-%%m-%%d %%H:%%M:00", "hour": "%%Y-%%m-%%d %%H:00:00"}[unit]
    return f"strftime('{pattern}', {column})"


def _rollup_columns():
    return ["n"] + [f"{name}_{kind}" for name in METRIC_NAMES for kind in ("avg", "max")]


def _upsert_sql(table, select_sql):
    columns = _rollup_columns()
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns)
    return (
        f"INSERT INTO {table} (vm_id, bucket, {', '.join(columns)}) {select_sql} "
        f"ON CONFLICT (vm_id, bucket) DO UPDATE SET {updates}"
    )


def _param(moment):
    return connection.ops.adapt_datetimefield_value(moment)


def roll_minutes(start, stop, vm_id=None):
    """(Re)compute the minute rollups of [start, stop) from raw samples."""
    aggregates = ", ".join(f"avg({n}), max({n})" for n in METRIC_NAMES)
    where = "ts >= %s AND ts < %s" + (" AND vm_id = %s" if vm_id is not None else "")
    select = (
        f"SELECT vm_id, {_bucket_sql('ts', 'minute')} AS b, count(*), {aggregates} "
        f"FROM metrics_sample WHERE {where} GROUP BY vm_id, b"
    )
    params = [_param(start), _param(stop)] + ([vm_id] if vm_id is not None else [])
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(MinuteRollup._meta.db_table, select), params)


def roll_hours(start, stop, vm_id=None):
    """(Re)compute the hour rollups of [start, stop) from the minute rollups.

    An hour's average weights each minute by its sample count, which is exact as long as a
    VM reports a nullable metric (GPU, fabric) in all or none of a minute's samples.
    """
    parts = []
    for name, nullable, *_range in METRIC_FIELDS:
        weight = f"CASE WHEN {name}_avg IS NOT NULL THEN n END" if nullable else "n"
        parts.append(f"sum({name}_avg * n) / sum({weight}), max({name}_max)")
    where = "bucket >= %s AND bucket < %s" + (" AND vm_id = %s" if vm_id is not None else "")
    select = (
        f"SELECT vm_id, {_bucket_sql('bucket', 'hour')} AS b, sum(n), {', '.join(parts)} "
        f"FROM {MinuteRollup._meta.db_table} WHERE {where} GROUP BY vm_id, b"
    )
    params = [_param(start), _param(stop)] + ([vm_id] if vm_id is not None else [])
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(HourRollup._meta.db_table, select), params)


def _locked_cursor(end):
    initial = floor_to(end - timedelta(seconds=conf.get("METRICS_MAX_AGE_SECONDS")), 3600)
    RollupCursor.objects.get_or_create(name=CURSOR, defaults={"upto": initial})
    return RollupCursor.objects.select_for_update().get(name=CURSOR)


def rollup(now=None):
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
            hours_from, hours_to = floor_to(start, 3600), floor_to(stop, 3600)
            if hours_from < hours_to:
                roll_hours(hours_from, hours_to)
            advanced += int((stop - cursor.upto).total_seconds() // 60)
            cursor.upto = stop
            cursor.save(update_fields=["upto"])
    roll_backlog()
    return advanced


def late_batch(vm_id, first_ts, last_ts, now):
    """A ``RollupBacklog`` (unsaved) for a batch old enough that the rollup's late window
    may have passed it, to be written with the batch; None for a batch on time.
    Times are Unix seconds."""
    if first_ts < now - (LATE_WINDOW - timedelta(minutes=1)).total_seconds():
        return RollupBacklog(vm_id=vm_id, start=_to_datetime(first_ts), end=_to_datetime(last_ts))
    return None


def roll_backlog():
    """Redo the closed buckets that late batches landed in, then forget those batches."""
    with transaction.atomic():
        cursor = RollupCursor.objects.select_for_update().filter(name=CURSOR).first()
        entries = list(RollupBacklog.objects.order_by("id")[:200]) if cursor else []
        for entry in entries:
            start = floor_to(entry.start, 60)
            stop = min(floor_to(entry.end, 60) + timedelta(minutes=1), cursor.upto)
            if start >= stop:
                continue  # not rolled up yet: the normal run will get it
            roll_minutes(start, stop, vm_id=entry.vm_id)
            hours_to = min(floor_to(stop - timedelta(microseconds=1), 3600) + timedelta(hours=1),
                           floor_to(cursor.upto, 3600))
            if floor_to(start, 3600) < hours_to:
                roll_hours(floor_to(start, 3600), hours_to, vm_id=entry.vm_id)
        RollupBacklog.objects.filter(pk__in=[e.pk for e in entries]).delete()
    return len(entries)
