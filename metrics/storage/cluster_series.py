"""A cluster's chart series from the cluster rollups (``metrics.models.cluster``): one query
that reads a row per minute or hour of the range, however many members the cluster has.

The range is split as ``series_sql.pieces`` splits it: whole hours already rolled up from the
cluster hour rows, whole minutes from the cluster minute rows, and what the rollup job has not
reached yet (the last minute or two) from the raw samples stamped with the cluster, reduced
in the same statement to the same per-minute figures (each member's mean per minute, then
across the members). Every piece's rows are sums, so a chart bucket adds them up exactly
whatever table each came from.

What a bucket of the charts shows, over the member-minutes in it (``cluster_models``): the
members' mean (utilisations), the slowest and busiest member's value minute by minute averaged
over the bucket, the spread, and the cluster's total throughput averaged over the minutes it
was reported; at one-minute buckets these are exactly each member's minute mean, then the
mean, lowest, highest and sum across the members that reported.
"""

import math
from datetime import datetime

from django.db import connection, transaction

from metrics.models import HOST
from metrics.models.cluster import ClusterHourRollup, ClusterMinuteRollup, stat_columns
from metrics.storage import series_sql
from metrics.storage.cluster_rollup import minute_stats
from metrics.storage.db import param

# The series of ChartData in aggregate mode, in the order ``fetch`` returns them:
# (series, how, metric or column). Not all are drawn: the record keeps max and spread too.
SERIES = (
    ("gpu_util", "mean", "gpu_util"),
    ("gpu_util_min", "min", "gpu_util"),
    ("gpu_util_max", "max", "gpu_util"),
    ("gpu_util_spread", "spread", "gpu_util"),
    ("gpu_mem_util", "mean", "gpu_mem_util"),
    ("cpu_util", "mean", "cpu_util"),
    ("mem_util", "mean", "mem_util"),
    ("net_rx", "total", "net_rx"),
    ("net_tx", "total", "net_tx"),
    ("fabric_rx", "total", "fabric_rx"),
    ("fabric_tx", "total", "fabric_tx"),
    ("link_gbps", "total", "link_gbps"),
    # The most members reporting at all / reporting a GPU figure in one minute of the bucket.
    ("reporting", "peak", "members_peak"),
    ("reporting_gpu", "peak", "gpu_peak"),
)
NAMES = tuple(name for name, _how, _of in SERIES)
SPREADS = frozenset(index for index, (_n, how, _of) in enumerate(SERIES) if how == "spread")
ROLLUPS = {"minute": ClusterMinuteRollup, "hour": ClusterHourRollup}


def _ratio(top: str, bottom: str) -> str:
    return f"sum({top}) / CAST(NULLIF(sum({bottom}), 0) AS DOUBLE PRECISION)"


def _figure(how: str, of: str) -> str:
    """The SQL of one series over a bucket's rows (the spread as a variance: its square
    root is taken in Python, where a rounding error below zero is clamped)."""
    if how == "mean":
        return _ratio(f"{of}_sum", f"{of}_n")
    if how in ("min", "max"):
        return _ratio(f"{of}_{how}sum", f"{of}_minutes")
    if how == "total":
        return _ratio(f"{of}_sum", f"{of}_minutes")
    if how == "spread":
        mean = _ratio(f"{of}_sum", f"{of}_n")
        return f"{_ratio(f'{of}_sumsq', f'{of}_n')} - {mean} * {mean}"
    return f"max({of})"  # peak


def _rollup_piece(source: str, step: int, part) -> tuple[str, list]:
    table = ROLLUPS[source]._meta.db_table
    return (
        f"SELECT {series_sql.bucket_expr('bucket', step)} AS b, {', '.join(stat_columns())} "  # noqa: S608 - names from the models and constants; values are parameters
        f"FROM {table} WHERE cluster_id = %s AND bucket >= %s AND bucket < %s",
        [param(part.start), param(part.stop)],
    )


def _raw_piece(step: int, part) -> tuple[str, list]:
    """The raw samples of ``part`` as per-minute figures: each member's mean per minute
    (as its minute rollup would have it), then across the members of each minute."""
    means = ", ".join(f"avg({name}) AS {name}_avg" for name in HOST.names)
    minute = series_sql.bucket_expr("ts", 60)
    per_member = (
        f"SELECT vm_id, {minute} AS mb, {means} FROM {HOST.raw._meta.db_table} "  # noqa: S608 - names from the models and constants; values are parameters
        "WHERE cluster_id = %s AND ts >= %s AND ts < %s GROUP BY vm_id, mb"
    )
    # Link rates are rolled up from the port rows only: none in the raw tail.
    figures = minute_stats(link="CAST(NULL AS DOUBLE PRECISION)")
    named = ", ".join(f"{sql} AS {name}" for sql, name in zip(figures, stat_columns(), strict=True))
    return (
        f"SELECT (m.mb * 60) / {int(step)} AS b, {named} FROM ({per_member}) m GROUP BY m.mb",  # noqa: S608 - names from the models and constants; values are parameters
        [param(part.start), param(part.stop)],
    )


def fetch(cluster_id: int, coarsest: str, step: int, start: datetime, stop: datetime) -> list:
    """[(bucket number, *SERIES values)] of the buckets of ``step`` seconds in [start, stop)
    that have data, in order; pieces no coarser than ``coarsest`` ("minute" or "hour")."""
    parts = series_sql.pieces(start, stop, series_sql.rolled_up_to(), coarsest)
    selects, params = [], []
    for part in parts:
        if part.source == "raw":
            sql, window = _raw_piece(step, part)
        else:
            sql, window = _rollup_piece(part.source, step, part)
        selects.append(sql)
        params += [cluster_id, *window]
    if not selects:
        return []
    figures = ", ".join(_figure(how, of) for _name, how, of in SERIES)
    sql = f"SELECT b, {figures} FROM ({' UNION ALL '.join(selects)}) pieces GROUP BY b ORDER BY b"  # noqa: S608 - names from the models and constants; values are parameters
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL jit = off")  # costs more than these few rows
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [tuple(_spread(v) if i - 1 in SPREADS else v for i, v in enumerate(row)) for row in rows]


def _spread(variance: float | None) -> float | None:
    return None if variance is None else math.sqrt(max(variance, 0.0))
