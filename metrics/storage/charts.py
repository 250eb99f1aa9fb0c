"""The 메트릭 tab's data and figures: cluster-level series aggregated in SQL.

The cluster's lines (member mean, slowest member, throughput totals) come from the cluster
rollups (``metrics.storage.cluster_series``): a row per minute or hour of the range, however many
members — 1h, 6h and 24h from the minute rows (1-, 1- and 3-minute points), 7d from the hour
rows, each completed to "now" from the finer tables. A bucket counts the members that reported
in it as members of this cluster (the cluster stamped on their samples), so attaching,
detaching or replacing a member never rewrites a cluster's history.

Per-member mode reads each member's own series (``series_sql``: raw samples for 1h, minute
rollups for 6h and 24h, hour rollups for 7d, finer ones where those are not rolled up yet):
the members drawn, and the ones a 교체 took out within the range up to the moment they left.
Only the points drawn come back to Python.

The figures drawn from this data are ``metrics.figures``.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from clusters.models import Operation, OperationItem
from metrics.models import HOST, METRIC_NAMES
from metrics.storage import cluster_series, series_sql
from vms.models import VirtualMachine, VmStatus


@dataclass(frozen=True)
class Window:
    seconds: int
    source: str  # "raw", "minute" or "hour": per-member mode's
    step: int  # bucket width in seconds, a multiple of the source's own

    @property
    def cluster(self) -> tuple[str, int]:
        """(coarsest cluster rollup, bucket width) of the aggregate lines: minutes at the
        finest, as the cluster rollups go."""
        return ("minute" if self.source == "raw" else self.source), max(self.step, 60)


# Per member: 1h at 20 s (180 points: wide enough that an agent's jitter never leaves a
# bucket empty), 6h at 1 min (360), 24h at 3 min (480), 7d at 1 h (168). Aggregate lines the
# same but 1h at 1 min (60): the cluster rollups' finest.
RANGES = {
    "1h": Window(3600, "raw", 20),
    "6h": Window(6 * 3600, "minute", 60),
    "24h": Window(86400, "minute", 180),
    "7d": Window(7 * 86400, "hour", 3600),
}
DEFAULT_RANGE = "1h"
TICK_FORMATS = {"1h": "%H:%M", "6h": "%H:%M", "24h": "%m-%d %H:%M", "7d": "%m-%d"}
MAX_POINTS = 500
GBIT = 1e9 / 8  # bytes/s in a Gb/s
# Per-member mode draws members x 8 series: coarser buckets keep the response small.
PER_MEMBER_VALUE_BUDGET = 12000
# Past this many members a line per member is a tangle nobody reads (and 1,800 traces at
# 256): per-member mode draws the members with the lowest GPU utilisation over the range,
# the ones worth a look; the heatmap shows every GPU of every member.
PER_MEMBER_SHOWN = 32
SOURCE_STEP = {"raw": 1, "minute": 60, "hour": 3600}
GPU_PANELS = ("gpu", "gpu-mem")


@dataclass
class ChartData:
    range_key: str
    step: int
    first_bucket: int  # bucket number: its start is first_bucket * step seconds since epoch
    points: int
    members: list  # [(vm_id, name)]
    per_member: bool
    # Per-member mode: the members drawn (all of them, or the PER_MEMBER_SHOWN slowest).
    shown: list = field(default_factory=list)
    # Aggregate mode: {series: [value or None per bucket]}. Per-member mode:
    # {metric: {vm_id: [value or None per bucket]}}.
    series: dict = field(default_factory=dict)
    # Former members replaced by 교체 within the range: their samples stay, marked 교체됨.
    replaced: dict = field(default_factory=dict)  # {vm_id: when it left}

    @property
    def start(self):
        return datetime.fromtimestamp(self.first_bucket * self.step, tz=UTC)

    @property
    def has_data(self):
        lines: Iterable
        if self.per_member:
            lines = (line for by_vm in self.series.values() for line in by_vm.values())
        else:
            lines = self.series.values()
        return any(v is not None for line in lines for v in line)

    @property
    def few_points(self):
        """Data in fewer than three buckets (a new cluster, the current hour of 7일): drawn
        as points, and the page says the range is still filling (집계 대기 중)."""
        if self.per_member:
            lines = [line for by_vm in self.series.values() for line in by_vm.values()]
        else:
            lines = list(self.series.values())
        filled = {i for line in lines for i, v in enumerate(line) if v is not None}
        return 0 < len(filled) < 3

    @property
    def link_capacity_gbps(self) -> float | None:
        """The members' fabric link rate, summed (the most over the range's buckets): the
        fabric chart's "% of link" axis. None in per-member mode or without port rates."""
        rates = [v for v in self.series.get("link_gbps", ()) if v] if not self.per_member else []
        return max(rates) if rates else None

    def no_gpu(self):
        """Members that reported in the window without any GPU figure (a VM with no GPU):
        names in per-member mode, else (how many, of how many reporting); None if none."""
        if self.per_member:
            series = self.series
            names = [
                name
                for vm_id, name in self.shown
                if any(v is not None for v in series["cpu_util"][vm_id])
                and all(v is None for v in series["gpu_util"][vm_id])
            ]
            return names or None
        reporting = max((v for v in self.series.get("reporting", ()) if v), default=0)
        with_gpu = max((v for v in self.series.get("reporting_gpu", ()) if v), default=0)
        return (reporting - with_gpu, reporting) if with_gpu < reporting else None


def window_step(window, members, per_member):
    """The bucket width: the aggregate lines', or per-member mode's (the range's own, or
    coarser so it stays in budget)."""
    if not per_member:
        return window.cluster[1]
    if not members:
        return window.step
    points = max(PER_MEMBER_VALUE_BUDGET // (len(METRIC_NAMES) * len(members)), 12)
    points = min(points, window.seconds // window.step, MAX_POINTS)
    step = math.ceil(window.seconds / points)
    unit = max(window.step, SOURCE_STEP[window.source])
    return math.ceil(step / unit) * unit


def cluster_members(cluster):
    return list(
        VirtualMachine.objects.filter(cluster=cluster)
        .exclude(status=VmStatus.DELETED)
        .order_by("name", "id")
        .values_list("pk", "name")
    )


def replaced_members(cluster, since) -> dict:
    """{(vm_id, name): when it left} of the VMs a 교체 took out of ``cluster`` since ``since``
    (and not members again): the evidence of why they were replaced stays in the charts,
    up to the moment each left."""
    rows = (
        OperationItem.objects.filter(
            operation__cluster=cluster,
            operation__kind=Operation.Kind.REPLACE,
            position=0,
            status=OperationItem.Status.SUCCEEDED,
            finished_at__gte=since,
        )
        .exclude(vm__cluster=cluster)
        .exclude(vm__isnull=True)
        .order_by("vm__name", "vm_id", "finished_at")
        .values_list("vm_id", "vm__name", "finished_at")
    )
    return {(vm_id, name): left for vm_id, name, left in rows}


def members_over(cluster, seconds, now=None) -> tuple[list, dict]:
    """([(vm_id, name)] of ``cluster``'s members and of those a 교체 took out within the last
    ``seconds``, {vm_id: when it left} of the latter): whom per-member figures are about."""
    now = now or timezone.now()
    gone = replaced_members(cluster, now - timedelta(seconds=seconds))
    current = cluster_members(cluster)
    members = current + [m for m in gone if m not in current]
    return members, {vm_id: left for (vm_id, _name), left in gone.items()}


def chart_data(cluster, range_key=DEFAULT_RANGE, per_member=False, now=None):
    """The series of ``cluster`` over ``range_key`` ending at ``now``: the cluster's lines,
    or each member's (the members replaced within the range too, up to when they left)."""
    window = RANGES[range_key]
    now = now or timezone.now()
    members, until = members_over(cluster, window.seconds, now)
    shown = _slowest(members, window, now) if per_member else []
    step = window_step(window, shown if per_member else members, per_member)
    last = int(now.timestamp()) // step
    points = window.seconds // step
    data = ChartData(
        range_key, step, last - points + 1, points, members, per_member, shown=shown, replaced=until
    )
    if not members:
        return data
    if not per_member:
        coarsest = window.cluster[0]
        stop = datetime.fromtimestamp((last + 1) * step, tz=UTC)
        data.series = {name: [None] * points for name in cluster_series.NAMES}
        for bucket, *values in cluster_series.fetch(cluster.pk, coarsest, step, data.start, stop):
            for name, value in zip(cluster_series.NAMES, values, strict=True):
                data.series[name][bucket - data.first_bucket] = value
        return data
    rows = _per_member(
        window.source,
        step,
        [vm_id for vm_id, _name in shown],
        data.start,
        datetime.fromtimestamp((last + 1) * step, tz=UTC),
        until,
    )
    data.series = {name: {vm_id: [None] * points for vm_id, _n in shown} for name in METRIC_NAMES}
    for bucket, vm_id, *values in rows:
        for name, value in zip(METRIC_NAMES, values, strict=True):
            data.series[name][vm_id][bucket - data.first_bucket] = value
    return data


def _slowest(members, window, now):
    """``members`` if there are at most PER_MEMBER_SHOWN, else the PER_MEMBER_SHOWN with the
    lowest mean GPU utilisation over the window (then those with no figure), in name order."""
    if len(members) <= PER_MEMBER_SHOWN:
        return members
    start = now - timedelta(seconds=window.seconds)
    parts = series_sql.pieces(start, now, series_sql.rolled_up_to(), "hour")
    rows = series_sql.fetch_means(HOST, parts, [vm_id for vm_id, _n in members], ("gpu_util",))
    util = {vm_id: value for _b, vm_id, value in rows}
    order = {vm_id: index for index, (vm_id, _name) in enumerate(members)}
    ranked = sorted(
        members, key=lambda m: (util.get(m[0]) is None, util.get(m[0]) or 0.0, order[m[0]])
    )
    chosen = {vm_id for vm_id, _name in ranked[:PER_MEMBER_SHOWN]}
    return [member for member in members if member[0] in chosen]


def _per_member(source, step, vm_ids, start, stop, until=None):
    """Each member's mean per bucket, from the coarsest tables that cover [start, stop)
    exactly (``series_sql``); a member of ``until`` only up to the moment it left."""
    parts = series_sql.pieces(start, stop, series_sql.rolled_up_to(), source)
    level1, params = series_sql.means_sql(HOST, parts, vm_ids, step, until=until)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # JIT compilation costs more than these small aggregates take to run.
            cursor.execute("SET LOCAL jit = off")
        cursor.execute(f"SELECT * FROM ({level1}) per_vm ORDER BY b, vm_id", params)  # noqa: S608 - names from the models and constants; values are parameters
        return cursor.fetchall()
