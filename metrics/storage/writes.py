"""Writing raw samples: all of a batch or none of it, in one round trip where possible.

Three ways in, chosen by size and database, all from the same columns (``micros`` — see
``metrics.storage.db`` — then ``METRIC_NAMES``):

- a small batch (at most ``SMALL_BATCH`` rows) on PostgreSQL: one prepared ``INSERT …
  SELECT … FROM (VALUES …)``. The ingest endpoint's variant takes the VM from the token in
  the same statement (``write_for_token``): an on-time agent batch is one round trip, like
  the lightest authenticated request;
- a larger one: binary COPY, packed here by ``struct`` (FIELD-NOTES: binary COPY is ~6x an
  ``executemany``, and packing by hand is a third of psycopg's ``write_row`` time);
- other databases (SQLite in the demo): ``bulk_create``.

Samples are telemetry: they commit asynchronously (``synchronous_commit = off`` for these
transactions only). A PostgreSQL crash may lose the last fraction of a second of acknowledged
samples, never consistency; in exchange no ingest request waits for a WAL flush, which
otherwise dominates a one-sample request. A missing day partition (beat not run yet, a fresh
database) is created and the write retried once.
"""

import struct
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from itertools import repeat

import psycopg
from django.db import IntegrityError, connection, transaction

from metrics.errors import Duplicate
from metrics.models import METRIC_NAMES, MetricsToken, RollupBacklog, Sample
from metrics.storage.db import datetime_of, is_postgresql, micros_of, sqlstate
from metrics.storage.partitions import ensure_partitions
from metrics.storage.rollups import is_late
from vms.models import VirtualMachine, VmStatus

COLUMNS = ("vm_id", "ts", *METRIC_NAMES)
PG_TYPES = ["int8", "timestamptz", *["float8"] * len(METRIC_NAMES)]
COPY_SQL = f"COPY {Sample._meta.db_table} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)"
SMALL_BATCH = 5  # rows; one INSERT of at most 50 parameters (psycopg caches its parse)


def _column(model, field):
    return model._meta.get_field(field).column


def _insert_sql(rows, by_token):
    """The INSERT of ``rows`` samples; ``by_token``: the VM is the token's (parameters: the
    rows without vm_id, then token hash, deleted status, claimed VM id twice)."""
    types = PG_TYPES[1:] if by_token else PG_TYPES
    row = "(" + ", ".join(f"%s::{pg_type}" for pg_type in types) + ")"  # a NULL is typed too
    # set_config(..., true) lasts until the end of this statement's own transaction, whose
    # commit it makes asynchronous: one round trip, no BEGIN/SET/COMMIT.
    sources = [
        "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit",
        f"(VALUES {', '.join([row] * rows)}) AS v",
    ]
    insert = f"INSERT INTO {Sample._meta.db_table} ({', '.join(COLUMNS)}) "
    if not by_token:
        return f"{insert}SELECT v.* FROM {', '.join(sources)}"
    # No row comes out for an unknown token, a deleted VM or another VM's id.
    token_vm = _column(MetricsToken, "vm")
    vm_table, vm_pk = VirtualMachine._meta.db_table, VirtualMachine._meta.pk.column
    sources.insert(1, f"{MetricsToken._meta.db_table} t JOIN {vm_table} vm "
                      f"ON vm.{vm_pk} = t.{token_vm}")
    return (
        f"{insert}SELECT t.{token_vm}, v.* FROM {', '.join(sources)} "
        f"WHERE t.{_column(MetricsToken, 'token_hash')} = %s "
        f"AND vm.{_column(VirtualMachine, 'status')} <> %s "
        f"AND (%s::int8 IS NULL OR t.{token_vm} = %s)"
    )


_INSERT = {n: _insert_sql(n, by_token=False) for n in range(1, SMALL_BATCH + 1)}
_INSERT_FOR_TOKEN = {n: _insert_sql(n, by_token=True) for n in range(1, SMALL_BATCH + 1)}


def write_samples(rows: Sequence[tuple], backlog: RollupBacklog | None = None) -> None:
    """Store ``rows`` (tuples in ``COLUMNS`` order, ``ts`` an aware datetime, any VMs) all or
    none, and with them ``backlog`` (an unsaved ``RollupBacklog`` for a late batch) if given.

    Raises ``metrics.errors.Duplicate`` if any (vm_id, ts) is already stored.
    """
    vm_ids, stamps, *metrics = (list(column) for column in zip(*rows, strict=True))
    _write(vm_ids, [micros_of(moment) for moment in stamps], metrics, backlog)


def write_batch(vm_id: int, columns: list, backlog: RollupBacklog | None = None) -> None:
    """``write_samples`` for one VM's validated batch as columns (``micros``, then
    ``METRIC_NAMES``): the ingest endpoint's path when ``write_for_token`` does not apply."""
    _write([vm_id] * len(columns[0]), columns[0], columns[1:], backlog)


def write_for_token(token_hash: str, claimed_vm: int | None, columns: list, now: float) -> bool:
    """Store a small, on-time batch for the VM of ``token_hash`` in one statement.

    Returns True when stored; False when this path does not apply (not PostgreSQL, a large
    or late batch) or the statement inserted nothing (unknown token, deleted VM, ``claimed_vm``
    not the token's): the caller then takes the ordinary path, which says which. Raises
    ``Duplicate`` if a sample is already stored (the token was good, then).
    """
    micros = columns[0]
    count = len(micros)
    if not is_postgresql() or count > SMALL_BATCH or is_late(min(micros), now):
        return False
    params = [value for row in zip(map(datetime_of, micros), *columns[1:], strict=True)
              for value in row]
    params += [token_hash, VmStatus.DELETED, claimed_vm, claimed_vm]
    return _insert(_INSERT_FOR_TOKEN[count], params, micros) == count


def _write(vm_ids, micros, metrics, backlog):
    if not is_postgresql():
        _with_partitions(lambda: _bulk_create(vm_ids, micros, metrics, backlog), micros)
    elif len(micros) <= SMALL_BATCH and backlog is None:
        stamps = map(datetime_of, micros)
        params = [value for row in zip(vm_ids, stamps, *metrics, strict=True) for value in row]
        _insert(_INSERT[len(micros)], params, micros)
    else:
        data = _pack_binary(vm_ids, micros, metrics)
        _with_partitions(lambda: _copy(data, backlog), micros)


def _insert(sql, params, micros):
    """Run one prepared INSERT; returns the rows inserted."""
    inserted = []

    def write():
        # One statement is atomic by itself; inside a caller's transaction a savepoint keeps
        # that transaction usable if it fails.
        scope = transaction.atomic() if connection.in_atomic_block else nullcontext()
        connection.ensure_connection()
        with scope, connection.wrap_database_errors:
            # Server-side binding and a statement prepared once per (pooled) connection:
            # Django's own cursors bind client-side, re-parsed and re-planned on every call.
            with psycopg.Cursor(connection.connection) as cursor:
                cursor.execute(sql, params, prepare=True)
                inserted.append(cursor.rowcount)

    _with_partitions(write, micros)
    return inserted[-1]


def _bulk_create(vm_ids, micros, metrics, backlog):
    with transaction.atomic():
        Sample.objects.bulk_create(
            Sample(vm_id=vm_id, ts=datetime_of(ts), **dict(zip(METRIC_NAMES, values, strict=True)))
            for vm_id, ts, *values in zip(vm_ids, micros, *metrics, strict=True)
        )
        if backlog is not None:
            backlog.save()


def _with_partitions(write: Callable[[], None], micros: Sequence[int]) -> None:
    try:
        write()
    except IntegrityError as exc:
        if not (is_postgresql() and sqlstate(exc) == "23514"):  # no partition for the row
            raise Duplicate() from exc
        ensure_partitions({datetime_of(ts).date() for ts in micros})
        try:
            write()
        except IntegrityError as again:
            raise Duplicate() from again


# COPY's binary format: signature, flags, header extension; then rows; then -1.
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = struct.pack("!h", -1)
# Binary timestamptz counts microseconds from 2000-01-01.
_PG_EPOCH_MICROS = micros_of(datetime(2000, 1, 1, tzinfo=UTC))
_NULL = struct.pack("!i", -1)  # a field of length -1, no data
_INT8 = struct.Struct("!iq")  # length-prefixed int64
_FLOAT8 = struct.Struct("!id")


def _pack_binary(vm_ids, micros, metrics):
    """COPY binary data for the batch: one ``struct`` call per row, by C-level maps.

    A metric column mixing values and nulls (rare: a GPU lost mid-batch) cannot be one fixed
    format; such a batch is packed field by field instead.
    """
    stamps = map((-_PG_EPOCH_MICROS).__add__, micros)
    if any(0 < column.count(None) < len(column) for column in metrics):
        return _pack_fields(vm_ids, stamps, metrics)
    fields = ["!h", "iq", "iq"]  # field count; vm_id; ts
    args = [repeat(len(COLUMNS)), repeat(8), vm_ids, repeat(8), stamps]
    for column in metrics:
        if column and column[0] is None:
            fields.append("i")
            args.append(repeat(-1))
        else:
            fields.append("id")
            args += [repeat(8), column]
    row = struct.Struct("".join(fields))
    return b"".join((_COPY_SIGNATURE, *map(row.pack, *args), _COPY_TRAILER))


def _pack_fields(vm_ids, stamps, metrics):
    count = struct.pack("!h", len(COLUMNS))
    parts = [_COPY_SIGNATURE]
    for vm_id, ts, *values in zip(vm_ids, stamps, *metrics, strict=True):
        parts += [count, _INT8.pack(8, vm_id), _INT8.pack(8, ts)]
        parts += [_NULL if value is None else _FLOAT8.pack(8, value) for value in values]
    parts.append(_COPY_TRAILER)
    return b"".join(parts)


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
