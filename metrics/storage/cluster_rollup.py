"""Keeping the cluster rollups (``metrics.models.cluster``): minute rows from the per-VM minute
rollups, hour rows from the minute rows, redone by the rollup job with the per-VM rows
(``rollups.rollup``: the closed minutes up to ~80 s ago, and the late window again), and for
the clusters a late batch landed in (``roll_backlog``).

Which cluster a member-minute counts for is the cluster stamped on its samples when they were
written (``Sample.cluster_id``), not a membership history kept beside the samples: the ingest
statement reads the VM row anyway (the token's join), so the stamp costs a column, and it is
right by construction — a VM changes cluster only while stopped, so it sends nothing between
the moment it leaves and the moment it joins. A history looked up by the rollup job would
instead race it: a 교체 detaches the old member seconds after its last samples, before the
job (up to a minute behind) has rolled them up.

A range is redone as a whole (delete, then insert, in the caller's transaction): a rerun
is harmless, and a minute that a late sample moved to another cluster leaves no stale row.
"""

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.db import connection

from metrics.models import MinuteRollup
from metrics.models.cluster import (
    CLUSTER_METRICS,
    ClusterHourRollup,
    ClusterMinuteRollup,
    stat_columns,
)
from metrics.models.devices import PortMinuteRollup
from metrics.storage.db import bucket_sql, param


def _stats(value: str) -> list:
    """The six figures of one metric over the member-minutes of a group (``cluster_models``)."""
    return [
        f"count({value})",
        f"CASE WHEN count({value}) > 0 THEN 1 ELSE 0 END",
        f"sum({value})",
        f"sum({value} * {value})",
        f"min({value})",
        f"max({value})",
    ]


def minute_stats(link: str = "p.link_gbps") -> list:
    """The SQL of a minute row's figures (``stat_columns`` order) over member-minute rows
    ``m`` (``<metric>_avg`` columns) and each one's link rate ``link``; shared with the
    charts' reading of raw samples (``metrics.storage.cluster_series``)."""
    parts = ["count(m.cpu_util_avg)", "count(m.gpu_util_avg)"]
    for _name, column in CLUSTER_METRICS:
        parts += _stats(f"m.{column}" if column else link)
    return parts


def _in(column: str, ids) -> tuple[str, list]:
    if ids is None:
        return "", []
    ids = sorted(ids)
    return f" AND {column} IN ({', '.join(['%s'] * len(ids))})", ids


def _execute(sql: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def roll_minutes(start: datetime, stop: datetime, clusters=None) -> None:
    """Redo the cluster minute rows of [start, stop) from the per-VM minute rollups, of every
    cluster or of ``clusters`` (ids)."""
    table = ClusterMinuteRollup._meta.db_table
    window = [param(start), param(stop)]
    only, ids = _in("cluster_id", clusters)
    _execute(f"DELETE FROM {table} WHERE bucket >= %s AND bucket < %s{only}", [*window, *ids])  # noqa: S608 - names from the models and constants; values are parameters
    minute, port = MinuteRollup._meta.db_table, PortMinuteRollup._meta.db_table
    member_only, member_ids = _in("m.cluster_id", clusters)
    links = (
        f"SELECT vm_id, bucket, sum(rate_gbps_avg) AS link_gbps FROM {port} "  # noqa: S608 - names from the models and constants; values are parameters
        "WHERE bucket >= %s AND bucket < %s"
    )
    link_params = list(window)
    if clusters is not None:
        # A late batch's clusters only: their members' ports, not every VM's.
        links += (
            f" AND vm_id IN (SELECT m.vm_id FROM {minute} m "  # noqa: S608 - names from the models and constants; values are parameters
            f"WHERE m.bucket >= %s AND m.bucket < %s{member_only})"
        )
        link_params += [*window, *member_ids]
    _execute(
        f"INSERT INTO {table} (cluster_id, bucket, {', '.join(stat_columns())}) "  # noqa: S608 - names from the models and constants; values are parameters
        f"SELECT m.cluster_id, m.bucket, {', '.join(minute_stats())} FROM {minute} m "
        f"LEFT JOIN ({links} GROUP BY vm_id, bucket) p "
        "ON p.vm_id = m.vm_id AND p.bucket = m.bucket "
        f"WHERE m.cluster_id IS NOT NULL AND m.bucket >= %s AND m.bucket < %s{member_only} "
        "GROUP BY m.cluster_id, m.bucket",
        [*link_params, *window, *member_ids],
    )


def roll_hours(start: datetime, stop: datetime, clusters=None) -> None:
    """Redo the cluster hour rows of the whole hours [start, stop): each the sum of its
    minute rows (the peaks: the highest)."""
    table, minute = ClusterHourRollup._meta.db_table, ClusterMinuteRollup._meta.db_table
    window = [param(start), param(stop)]
    only, ids = _in("cluster_id", clusters)
    _execute(f"DELETE FROM {table} WHERE bucket >= %s AND bucket < %s{only}", [*window, *ids])  # noqa: S608 - names from the models and constants; values are parameters
    columns = stat_columns()
    figures = ", ".join(
        f"max({column})" if column.endswith("_peak") else f"sum({column})" for column in columns
    )
    _execute(
        f"INSERT INTO {table} (cluster_id, bucket, {', '.join(columns)}) "  # noqa: S608 - names from the models and constants; values are parameters
        f"SELECT cluster_id, {bucket_sql('bucket', 'hour')} AS b, {figures} FROM {minute} "
        f"WHERE bucket >= %s AND bucket < %s{only} GROUP BY cluster_id, b",
        [*window, *ids],
    )


def clusters_of(vm_id: int, start: datetime, stop: datetime) -> set:
    """The clusters VM ``vm_id``'s minutes of [start, stop) count for."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT cluster_id FROM {MinuteRollup._meta.db_table} "  # noqa: S608 - names from the models and constants; values are parameters
            "WHERE vm_id = %s AND bucket >= %s AND bucket < %s AND cluster_id IS NOT NULL",
            [vm_id, param(start), param(stop)],
        )
        return {cluster_id for (cluster_id,) in cursor.fetchall()}


class Redo:
    """The cluster rows late batches touched: per cluster, the minute ranges to redo, merged
    (an agent's backlog arrives as many consecutive batches; its cluster is redone once)."""

    def __init__(self) -> None:
        self.ranges: dict = defaultdict(list)

    def add(self, clusters, start: datetime, stop: datetime) -> None:
        for cluster_id in clusters:
            self.ranges[cluster_id].append((start, stop))

    def run(self, hours_upto: datetime) -> None:
        """Redo the minutes, then the whole hours before ``hours_upto`` (those rolled up)."""
        for cluster_id, ranges in sorted(self.ranges.items()):
            for start, stop in _merged(ranges):
                roll_minutes(start, stop, [cluster_id])
                first = _floor_hour(start)
                hours_to = min(
                    _floor_hour(stop - timedelta(microseconds=1)) + timedelta(hours=1),
                    hours_upto,
                )
                if first < hours_to:
                    roll_hours(first, hours_to, [cluster_id])


def _floor_hour(moment: datetime) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % 3600, tz=UTC)


def _merged(ranges: list) -> list:
    merged: list = []
    for start, stop in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged
