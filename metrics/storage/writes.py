"""Writing raw samples: all of a batch or none of it, in one round trip where possible.

Three ways in, chosen by size and database, all from the same columns (``micros`` — see
``metrics.storage.db`` — then ``METRIC_NAMES``), and with them the batch's per-GPU and
per-port rows (``devices``: ``{"gpu"|"port": [indexes, micros, *metric columns]}``), stored in
the same statement or transaction, so a batch is all stored or none of it:

- a small batch (at most ``SMALL_BATCH`` samples and ``SMALL_DEVICE_ROWS`` device rows) on
  PostgreSQL: one prepared ``INSERT … SELECT … FROM (VALUES …)``, with the device rows as
  data-modifying CTEs of the same statement. The ingest endpoint's variant takes the VM from
  the token in the same statement (``write_for_token``): an on-time agent batch (host, 8 GPUs,
  4 ports) is one round trip, like the lightest authenticated request;
- a larger one: binary COPY per table in one transaction (``metrics.storage.binary``);
- other databases (SQLite in the demo): ``bulk_create``.

Every host row is stamped with its VM's cluster at the moment it is written
(``Sample.cluster_id``, what the cluster rollups group by): read from the VM row by the same
statement (the token's join, or a subquery); for COPY and ``bulk_create`` read with the token
by the endpoint (``ingest.lookup_member``), or looked up once per batch.

Samples are telemetry: they commit asynchronously (``synchronous_commit = off`` for these
transactions only). A PostgreSQL crash may lose the last fraction of a second of acknowledged
samples, never consistency; in exchange no ingest request waits for a WAL flush, which
otherwise dominates a one-sample request. A missing day partition (beat not run yet, a fresh
database) is created and the write retried once.
"""

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import lru_cache, partial

import psycopg
from django.db import IntegrityError, connection, transaction

from metrics import liveness
from metrics.errors import Duplicate
from metrics.models import GPU, METRIC_NAMES, PORT, MetricsToken, RollupBacklog, Sample
from metrics.storage import binary
from metrics.storage.db import datetime_of, is_postgresql, micros_of, sqlstate
from metrics.storage.partitions import ensure_partitions
from metrics.storage.rollups import is_late
from vms.models import VirtualMachine, VmStatus

# A host row as stored: a sample's columns, then the cluster stamp.
COLUMNS = ("vm_id", "ts", *METRIC_NAMES, "cluster_id")
PG_TYPES = ["int8", "timestamptz", *["float8"] * len(METRIC_NAMES), "int8"]
COPY_SQL = f"COPY {Sample._meta.db_table} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)"
SMALL_BATCH = 5  # samples; one INSERT of at most 50 host parameters (psycopg caches its parse)
SMALL_DEVICE_ROWS = 96  # GPU + port rows in that INSERT: 8 GPUs and 4 ports a sample
DEVICES = {"gpu": GPU, "port": PORT}
LOOK_UP = object()  # write_batch's cluster_id when the caller did not read it


def _device_columns(series):
    return ("vm_id", "ts", series.keys[1], *series.names)


def _copy_sql(series):
    return (
        f"COPY {series.raw._meta.db_table} ({', '.join(_device_columns(series))}) "
        "FROM STDIN (FORMAT BINARY)"
    )


def _column(model, field):
    return model._meta.get_field(field).column


def _values(types, rows):
    row = "(" + ", ".join(f"%s::{pg_type}" for pg_type in types) + ")"  # a NULL is typed too
    return f"(VALUES {', '.join([row] * rows)})"


@lru_cache(maxsize=64)
def _insert_sql(rows, by_token, devices=()):
    """The INSERT of ``rows`` samples and the rows of the device tables named in ``devices``.

    ``by_token``: the VM is the token's; parameters per table, host first: its rows (a
    device table's as one array per column) without vm_id, then token hash, deleted
    status, claimed VM id twice (each table's insert checks the token); last, the agent's
    call noted on its token (``metrics.liveness``): the instant, the token hash and the
    instant a previous note must be older than to be replaced. With device rows, or by
    token, the inserts are CTEs of one statement, which answers the host rows inserted.
    The cluster stamp is never a parameter: the token's VM row, or a subquery on ``vm_id``.
    """
    types = PG_TYPES[1:-1] if by_token else PG_TYPES[:-1]
    # set_config(..., true) lasts until the end of this statement's own transaction, whose
    # commit it makes asynchronous: one round trip, no BEGIN/SET/COMMIT.
    async_commit = "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"
    vm_table, vm_pk = VirtualMachine._meta.db_table, VirtualMachine._meta.pk.column
    vm_cluster = _column(VirtualMachine, "cluster")
    vm_source, vm_column, where = "", "", ""
    # VALUES columns are column1, column2, ...: column1 is vm_id unless the token gives it.
    stamp = f"(SELECT c.{vm_cluster} FROM {vm_table} c WHERE c.{vm_pk} = v.column1)"  # noqa: S608 - names from the models and constants; values are parameters
    if by_token:
        # No row comes out for an unknown token, a deleted VM or another VM's id.
        token_vm = _column(MetricsToken, "vm")
        stamp = f"vm.{vm_cluster}"
        vm_source = (
            f", {MetricsToken._meta.db_table} t JOIN {vm_table} vm ON vm.{vm_pk} = t.{token_vm}"
        )
        vm_column = f"t.{token_vm}, "
        where = (
            f" WHERE t.{_column(MetricsToken, 'token_hash')} = %s "
            f"AND vm.{_column(VirtualMachine, 'status')} <> %s "
            f"AND (%s::int8 IS NULL OR t.{token_vm} = %s)"
        )
    host = (
        f"INSERT INTO {Sample._meta.db_table} ({', '.join(COLUMNS)}) "  # noqa: S608 - names from the models and constants; values are parameters
        f"SELECT {vm_column}v.*, {stamp} "
        f"FROM {async_commit}{vm_source}, {_values(types, rows)} AS v"
    )
    if not devices and not by_token:
        return host + where
    parts = [f"h AS ({host}{where} RETURNING 1)"]
    for name in devices:
        # A device table's rows as one array per column (unnest): 15 parameters for 8 GPUs
        # rather than 120, each bound by psycopg's C dumpers, and one statement per shape.
        series = DEVICES[name]
        columns = _device_columns(series)
        types = ["int8", "timestamptz", "int2", *["float8"] * len(series.names)]
        if by_token:
            columns, types = columns[1:], types[1:]
        arrays = ", ".join(f"%b::{pg_type}[]" for pg_type in types)  # binary: no quoting scan
        parts.append(
            f"{name} AS (INSERT INTO {series.raw._meta.db_table} "  # noqa: S608 - names from the models and constants; values are parameters
            f"({', '.join(_device_columns(series))}) SELECT {vm_column}v.* "
            f"FROM {async_commit}{vm_source}, unnest({arrays}) AS v({', '.join(columns)})"
            f"{where})"
        )
    if by_token:
        # The call noted in the same statement, so asynchronously committed too: an UPDATE
        # of its own was a round trip and a WAL flush on most agent POSTs.
        seen = _column(MetricsToken, "last_seen_at")
        parts.append(
            f"seen AS (UPDATE {MetricsToken._meta.db_table} SET {seen} = %s "  # noqa: S608 - names from the models and constants; values are parameters
            f"WHERE {_column(MetricsToken, 'token_hash')} = %s "
            f"AND ({seen} IS NULL OR {seen} < %s) AND EXISTS (SELECT 1 FROM h))"
        )
    return f"WITH {', '.join(parts)} SELECT count(*) FROM h"  # noqa: S608 - names from the models and constants; values are parameters


def _shape(devices):
    """(name, …) of the non-empty device tables, as ``_insert_sql`` takes them."""
    return tuple(name for name in DEVICES if devices.get(name) and devices[name][0])


def write_samples(
    rows: Sequence[tuple], backlog: RollupBacklog | None = None, devices: dict | None = None
) -> None:
    """Store ``rows`` (``(vm_id, ts, *METRIC_NAMES)``, ``ts`` an aware datetime, any VMs; each
    stamped with its VM's cluster now) all or none, with ``devices``
    (``{"gpu"|"port": [(vm_id, ts, index, *metrics), …]}``) and ``backlog`` (an unsaved
    ``RollupBacklog`` for a late batch) if given.

    Raises ``metrics.errors.Duplicate`` if any (vm_id, ts) is already stored.
    """
    vm_ids, stamps, *metrics = (list(column) for column in zip(*rows, strict=True))
    by_table = {}
    for name, device_rows in (devices or {}).items():
        if device_rows:
            ids, moments, indexes, *values = (list(c) for c in zip(*device_rows, strict=True))
            by_table[name] = (ids, indexes, [micros_of(m) for m in moments], values)
    _write(vm_ids, [micros_of(moment) for moment in stamps], metrics, backlog, by_table)


def write_batch(
    vm_id: int,
    columns: list,
    backlog: RollupBacklog | None = None,
    devices: dict | None = None,
    *,
    cluster_id: object = LOOK_UP,
) -> None:
    """``write_samples`` for one VM's validated batch as columns (``micros``, then
    ``METRIC_NAMES``) and device columns: the ingest endpoint's path when
    ``write_for_token`` does not apply. ``cluster_id``: the VM's cluster if the caller read it
    with the token (``ingest.lookup_member``), else it is looked up."""
    by_table = {
        name: ([vm_id] * len(cols[0]), cols[0], cols[1], cols[2:])
        for name, cols in (devices or {}).items()
        if cols and cols[0]
    }
    count = len(columns[0])
    clusters = None if cluster_id is LOOK_UP else [cluster_id] * count
    _write([vm_id] * count, columns[0], columns[1:], backlog, by_table, clusters)


def write_for_token(
    token_hash: str, claimed_vm: int | None, columns: list, now: float, devices: dict | None = None
) -> bool:
    """Store a small, on-time batch for the VM of ``token_hash`` in one statement.

    Returns True when stored, the agent's call noted with it (``metrics.liveness.noted``);
    False when this path does not apply (not PostgreSQL, a large or late batch) or the
    statement inserted nothing (unknown token, deleted VM, ``claimed_vm`` not the token's):
    the caller then takes the ordinary path, which says which. Raises ``Duplicate`` if a
    sample is already stored (the token was good, then).
    """
    micros = columns[0]
    count = len(micros)
    devices = devices or {}
    shape = _shape(devices)
    if (
        not is_postgresql()
        or count > SMALL_BATCH
        or is_late(min(micros), now)
        or sum(len(devices[name][0]) for name in shape) > SMALL_DEVICE_ROWS
    ):
        return False
    check = [token_hash, VmStatus.DELETED, claimed_vm, claimed_vm]  # each table's WHERE
    params = [
        value for row in zip(map(datetime_of, micros), *columns[1:], strict=True) for value in row
    ] + check
    for name in shape:
        indexes, stamps, *values = devices[name]
        params += [*_arrays(stamps, indexes, values), *check]
    params += [*liveness.noted(token_hash)]
    return _insert(_insert_sql(count, True, shape), params, micros, True) == count


def _arrays(stamps, indexes, values):
    """A device table's columns as the small INSERT binds them (``binary.array``)."""
    return [
        binary.timestamps(stamps),
        binary.array(binary.Int2Array, indexes),
        *(binary.array(binary.Float8Array, column) for column in values),
    ]


def _write(vm_ids, micros, metrics, backlog, devices, clusters=None):
    """Write by the way that fits; ``clusters``: each row's cluster stamp, if the caller knows
    them (the small INSERT reads them itself)."""
    rows = sum(len(table[0]) for table in devices.values())
    if not is_postgresql():
        clusters = _clusters_of(vm_ids) if clusters is None else clusters
        write = partial(_bulk_create, vm_ids, clusters, micros, metrics, backlog, devices)
        _with_partitions(write, micros)
    elif len(micros) <= SMALL_BATCH and backlog is None and rows <= SMALL_DEVICE_ROWS:
        stamps = map(datetime_of, micros)
        params = [value for row in zip(vm_ids, stamps, *metrics, strict=True) for value in row]
        shape = tuple(name for name in DEVICES if name in devices)
        for name in shape:
            ids, indexes, stamps_, values = devices[name]
            params += [binary.array(binary.Int8Array, ids), *_arrays(stamps_, indexes, values)]
        _insert(_insert_sql(len(micros), False, shape), params, micros, bool(shape))
    else:
        clusters = _clusters_of(vm_ids) if clusters is None else clusters
        data = [(COPY_SQL, binary.pack(vm_ids, micros, None, metrics, clusters))]
        for name, (ids, indexes, stamps, values) in devices.items():
            data.append((_copy_sql(DEVICES[name]), binary.pack(ids, stamps, indexes, values)))
        _with_partitions(lambda: _copy(data, backlog), micros)


def _insert(sql, params, micros, counted):
    """Run one prepared INSERT; returns the host rows inserted."""
    inserted = []

    def write():
        # One statement is atomic by itself; inside a caller's transaction a savepoint keeps
        # that transaction usable if it fails.
        scope = transaction.atomic() if connection.in_atomic_block else nullcontext()
        connection.ensure_connection()
        with scope, connection.wrap_database_errors:
            # Server-side binding and a statement prepared once per (pooled) connection:
            # Django's own cursors bind client-side, re-parsed and re-planned on every call.
            binary.register(connection.connection.adapters)
            with psycopg.Cursor(connection.connection) as cursor:
                cursor.execute(sql, params, prepare=True)
                inserted.append(cursor.fetchone()[0] if counted else cursor.rowcount)  # type: ignore[index]  # count(*): a row

    _with_partitions(write, micros)
    return inserted[-1]


def _clusters_of(vm_ids):
    """Each row's cluster stamp: the cluster of its VM now (one query for the batch)."""
    clusters = dict(
        VirtualMachine.objects.filter(pk__in=set(vm_ids)).values_list("pk", "cluster_id")
    )
    return [clusters.get(vm_id) for vm_id in vm_ids]


def _bulk_create(vm_ids, clusters, micros, metrics, backlog, devices):
    with transaction.atomic():
        Sample.objects.bulk_create(
            Sample(
                vm_id=vm_id,
                ts=datetime_of(ts),
                cluster_id=cluster_id,
                **dict(zip(METRIC_NAMES, values, strict=True)),
            )
            for vm_id, cluster_id, ts, *values in zip(
                vm_ids, clusters, micros, *metrics, strict=True
            )
        )
        for name, (ids, indexes, stamps, values) in devices.items():
            series = DEVICES[name]
            series.raw._default_manager.bulk_create(
                series.raw(
                    vm_id=vm_id,
                    ts=datetime_of(ts),
                    **{series.keys[1]: index},
                    **dict(zip(series.names, row, strict=True)),
                )
                for vm_id, index, ts, *row in zip(ids, indexes, stamps, *values, strict=True)
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


def _copy(data, backlog):
    with transaction.atomic(), connection.cursor() as cursor:
        _async_commit(cursor, backlog)
        for sql, payload in data:
            with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
                copy.write(payload)


def _async_commit(cursor, backlog):
    """Make this transaction's commit asynchronous, and note ``backlog`` if any, in one
    statement (one round trip fewer than SET LOCAL and an INSERT)."""
    if backlog is None:
        cursor.execute("SET LOCAL synchronous_commit = off")
        return
    cursor.execute(
        f'INSERT INTO {RollupBacklog._meta.db_table} (vm_id, start, "end") '  # noqa: S608 - names from the models and constants; values are parameters
        "SELECT %s, %s, %s FROM (SELECT set_config('synchronous_commit', 'off', true)) AS s",
        [backlog.vm_id, backlog.start, backlog.end],
    )
