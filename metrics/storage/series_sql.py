"""Reading a series over a range from the coarsest tables that cover it exactly.

A range is split into pieces: whole hours already rolled up come from the hour rollups,
whole minutes already rolled up from the minute rollups, and the rest (the range's ragged
edges, and everything since the rollups' cursor) from the raw rows. Each piece contributes
sums and weights (``sum(avg * n)``, ``sum(n)`` of the rows that have the metric), so the
pieces add up to exactly the mean of the raw samples — the current hour is in the 7d view,
and a 24h aggregate reads ~1,400 rows per device instead of ~8,600.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from metrics.models import RollupCursor
from metrics.storage.rollups import CURSOR

UNITS = {"hour": 3600, "minute": 60}
FINER = {"hour": "minute", "minute": "raw"}


@dataclass(frozen=True)
class Piece:
    source: str  # "raw", "minute" or "hour"
    start: datetime
    stop: datetime


def rolled_up_to() -> datetime | None:
    """The rollups' cursor: minutes before it are rolled up, and hours before its hour."""
    return RollupCursor.objects.filter(name=CURSOR).values_list("upto", flat=True).first()


def _floor(moment, unit):
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % unit, tz=UTC)


def _ceil(moment, unit):
    floor = _floor(moment, unit)
    return floor if floor == moment else floor + timedelta(seconds=unit)


def pieces(start: datetime, stop: datetime, upto: datetime | None, coarsest: str) -> list:
    """[Piece] covering [start, stop) with no overlap, using sources no coarser than
    ``coarsest`` (a range's bucket width must be a multiple of the source's)."""
    if start >= stop:
        return []
    if coarsest == "raw" or upto is None:
        return [Piece("raw", start, stop)]
    unit = UNITS[coarsest]
    done = _floor(upto, 3600) if coarsest == "hour" else _floor(upto, 60)
    lo, hi = _ceil(start, unit), min(_floor(stop, unit), done)
    if lo >= hi:
        return pieces(start, stop, upto, FINER[coarsest])
    return (
        pieces(start, lo, upto, FINER[coarsest])
        + [Piece(coarsest, lo, hi)]
        + pieces(hi, stop, upto, FINER[coarsest])
    )


def bucket_expr(column: str, step: int | None) -> str:
    """The bucket number of ``column`` at ``step`` seconds (UTC epoch), or 0 for one bucket."""
    if step is None:
        return "0"
    if connection.vendor == "postgresql":
        return f"floor(extract(epoch FROM {column}) / {int(step)})::bigint"
    # %% survives the placeholder pass as %.
    return f"CAST(strftime('%%s', {column}) AS INTEGER) / {int(step)}"


ROLLUP_SECONDS = {"minute": 60, "hour": 3600}  # a rollup part's bucket width


def means_sql(series, parts: list, vm_ids: list, step: int | None, names=None, until=None):
    """(sql, params): per bucket and device key (``series.keys``), the mean of each metric
    of ``names`` (default all) over ``parts``: columns ``b, <keys>, <names>``; a VM of
    ``until`` ({vm_id: moment}, members that left) only up to its moment."""
    names = names or series.names
    keys = ", ".join(series.keys)
    placeholders = ", ".join(["%s"] * len(vm_ids))
    selects, params = [], []
    for part in parts:
        if part.source == "raw":
            table, time_column = series.raw._meta.db_table, "ts"
            sums = ", ".join(f"sum({n}) AS {n}_s, count({n}) AS {n}_w" for n in names)
        else:
            model = series.minute if part.source == "minute" else series.hour
            table, time_column = model._meta.db_table, "bucket"
            sums = ", ".join(
                f"sum({n}_avg * n) AS {n}_s, sum(CASE WHEN {n}_avg IS NOT NULL THEN n END) AS {n}_w"
                for n in names
            )
        grouped = f"GROUP BY b, {keys}"
        if part.source != "raw" and step == ROLLUP_SECONDS[part.source]:
            # One rollup row per bucket and key already (the table's key): its sums as they
            # are, not a second aggregation of ~members x devices x minutes rows per bucket.
            sums = ", ".join(
                f"{n}_avg * n AS {n}_s, CASE WHEN {n}_avg IS NOT NULL THEN n END AS {n}_w"
                for n in names
            )
            grouped = ""
        cut, cut_params = _until(time_column, until)
        selects.append(
            f"SELECT {bucket_expr(time_column, step)} AS b, {keys}, {sums} FROM {table} "  # noqa: S608 - names from the models and constants; values are parameters
            f"WHERE vm_id IN ({placeholders}) AND {time_column} >= %s AND {time_column} < %s "
            f"{cut}{grouped}"
        )
        params += [*vm_ids, _param(part.start), _param(part.stop), *cut_params]
    means = ", ".join(
        f"sum({n}_s) / CAST(NULLIF(sum({n}_w), 0) AS DOUBLE PRECISION) AS {n}" for n in names
    )
    sql = (
        f"SELECT b, {keys}, {means} FROM ({' UNION ALL '.join(selects)}) pieces GROUP BY b, {keys}"  # noqa: S608 - names from the models and constants; values are parameters
    )
    return sql, params


def _until(column, until):
    """The clause (and its params) that drops the rows of each VM of ``until`` from its
    moment on."""
    if not until:
        return "", []
    clause = "".join(f"AND NOT (vm_id = %s AND {column} >= %s) " for _vm in until)
    return clause, [p for vm_id, moment in until.items() for p in (vm_id, _param(moment))]


def fetch_means(series, parts: list, vm_ids: Iterable[int], names, until=None) -> list:
    """Rows of ``means_sql`` over the whole of ``parts`` (one bucket): ``0, <keys>, <names>``."""
    if not parts or not vm_ids:
        return []
    sql, params = means_sql(series, parts, list(vm_ids), None, names, until)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL jit = off")  # costs more than these aggregates
        cursor.execute(sql, params)
        return cursor.fetchall()


def _param(moment):
    return connection.ops.adapt_datetimefield_value(moment)


def fetch_spans(series, parts: list, vm_ids: list) -> dict:
    """{vm_id: seconds} from each device's first sample to its last over ``parts`` (a rollup
    row counts as its whole minute or hour): how long each one has been reporting in the
    range. A VM with no rows is absent. On PostgreSQL two index probes per VM and piece
    (first, last), so a week of minute rollups is not read to find them."""
    if not parts or not vm_ids:
        return {}
    selects, params = [], []
    for part in parts:
        model = {"raw": series.raw, "minute": series.minute, "hour": series.hour}[part.source]
        table, column = model._meta.db_table, "ts" if part.source == "raw" else "bucket"
        width, window = UNITS.get(part.source, 0), [_param(part.start), _param(part.stop)]
        if connection.vendor == "postgresql":
            probe = (
                f"(SELECT {column} AS t FROM {table} WHERE vm_id = v.id AND {column} >= %s"  # noqa: S608 - names from the models and constants; values are parameters
                f" AND {column} < %s ORDER BY {column} {{}} LIMIT 1)"
            )
            selects.append(
                f"SELECT v.id, lo.t, hi.t, {width} FROM unnest(%s::bigint[]) AS v(id) "  # noqa: S608 - names from the models and constants; values are parameters
                f"CROSS JOIN LATERAL {probe.format('ASC')} AS lo "
                f"CROSS JOIN LATERAL {probe.format('DESC')} AS hi"
            )
            params += [list(vm_ids), *window, *window]
        else:
            placeholders = ", ".join(["%s"] * len(vm_ids))
            selects.append(
                f"SELECT vm_id, min({column}), max({column}), {width} FROM {table} "  # noqa: S608 - names from the models and constants; values are parameters
                f"WHERE vm_id IN ({placeholders}) AND {column} >= %s AND {column} < %s "
                f"GROUP BY vm_id"
            )
            params += [*vm_ids, *window]
    bounds: dict = {}
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        for vm_id, lo, hi, width in cursor.fetchall():
            lo, hi = _moment(lo), _moment(hi) + timedelta(seconds=width)
            old = bounds.get(vm_id)
            bounds[vm_id] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
    return {vm_id: (hi - lo).total_seconds() for vm_id, (lo, hi) in bounds.items()}


def _moment(value):
    """A datetime as the backend returns it (SQLite: text) as an aware datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
