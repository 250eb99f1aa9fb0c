"""Which node is slow: per-GPU and per-port figures over the chosen range, the five
slowest, the node × GPU heatmap, and the straggler — named only when there is one
(``find_straggler``: a gap to the cluster median past the 검증 기준's criteria, sustained).

One query per series: each device's mean over the range from the coarsest tables that
cover it (``series_sql``: hour rollups for whole hours, then minutes, then raw rows), so the
24h view reads about as many rows as the 1h one. A GPU is compared by its mean utilisation;
the gap to the median is in percentage points.

Only members that have been reporting for a while are ranked. A figure is a mean over the
samples a member sent, i.e. over the time it was running, never over the whole range; and a
member with less than ``JOINED_SECONDS`` of samples in the range (a 교체 spare, a member
attached or started a minute ago, still warming up) is shown as 방금 합류 and never named
the slowest. Replaced members (``replaced``) keep their cells in the heatmap, marked 교체됨,
and are not ranked either: they are no longer in the cluster.
"""

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max
from django.template.defaultfilters import floatformat
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.models.validation import (
    STRAGGLER_GPU_POINTS,
    STRAGGLER_MINUTES,
    STRAGGLER_PORT_PERCENT,
    ValidationThreshold,
)
from metrics.models import GPU, HOST, PORT
from metrics.storage import charts, series_sql

BOTTOM = 5
JOINED_SECONDS = 300  # less data than this in the range: 방금 합류, not ranked
HEATMAP_METRICS = ("util", "temp", "power")
PORT_METRICS = ("rx", "tx", "rate_gbps")


@dataclass(frozen=True)
class Criteria:
    """When a member is a straggler: its gap past ``gpu_points`` (GPU utilisation, %p) or
    ``port_percent`` (a fabric port's throughput, % of the median) for ``minutes``."""

    gpu_points: float = STRAGGLER_GPU_POINTS
    port_percent: float = STRAGGLER_PORT_PERCENT
    minutes: int = STRAGGLER_MINUTES


def criteria_for(cluster) -> Criteria:
    """The cluster's straggler criteria: its instance type and fabric's 검증 기준 row, or the
    defaults a row would be made with (read only: a page view writes no row)."""
    row = (
        ValidationThreshold.objects.filter(
            instance_type_id=cluster.instance_type_id, fabric=cluster.fabric_type
        )
        .values_list("straggler_gpu_points", "straggler_port_percent", "straggler_minutes")
        .first()
    )
    return Criteria(*row) if row else Criteria()


@dataclass(frozen=True)
class Straggler:
    """A device the rule names: its key, and its gap to the cluster median (the median of
    its per-minute gaps over the ``minutes`` judged: points, or percent of the median)."""

    key: tuple
    gap: float
    minutes: int


def find_straggler(
    series: dict, threshold: float, minutes: int, relative: bool = False
) -> Straggler | None:
    """The straggler among ``series`` ({key: {minute: value}}, each device's per-minute
    means), or None: the cluster has no straggler.

    Each minute's median is taken over the devices that reported in that minute, and a
    device's gap is its value minus that median (``relative``: as a percent of it). A device
    is judged over its own last ``minutes`` reporting minutes only — minutes it sent nothing
    count neither for nor against it, and a device that has reported for fewer is not judged
    yet (a member that just joined). It is a straggler when its gap over those minutes (the
    median of its per-minute gaps: more than half of them) is below ``-threshold``, strictly:
    a sustained gap, which one checkpoint or another member's dip moving a minute's median
    does not make or break. Of several, the one furthest below is named (then the lowest key).
    """
    if minutes < 1:
        raise ValueError("minutes must be at least 1")
    by_minute = defaultdict(list)
    for values in series.values():
        for minute, value in values.items():
            by_minute[minute].append(value)
    medians = {minute: statistics.median(values) for minute, values in by_minute.items()}
    found = []
    for key, values in series.items():
        judged = sorted(values)[-minutes:]
        if len(judged) < minutes:
            continue
        gaps = [_gap(values[minute], medians[minute], relative) for minute in judged]
        gap = statistics.median(gaps)
        if gap < -threshold:
            found.append(Straggler(key, gap, minutes))
    return min(found, key=lambda s: (s.gap, s.key)) if found else None


def _gap(value, median, relative):
    if not relative:
        return value - median
    return 100.0 * (value - median) / median if median > 0 else 0.0


@dataclass(frozen=True)
class GpuFigure:
    vm_id: int
    node: str
    gpu: int
    util: float | None
    temp: float | None
    power: float | None


@dataclass(frozen=True)
class PortFigure:
    vm_id: int
    node: str
    port: int
    rx_gbps: float | None
    tx_gbps: float | None
    rate_gbps: float | None

    @property
    def gbps(self) -> float | None:
        """The busier direction: what the port carried of its link."""
        values = [v for v in (self.rx_gbps, self.tx_gbps) if v is not None]
        return max(values) if values else None

    @property
    def link_percent(self) -> float | None:
        if self.gbps is None or not self.rate_gbps:
            return None
        return 100.0 * self.gbps / self.rate_gbps


@dataclass(frozen=True)
class Named:
    """A straggler as the console names it: the member, its GPU or port (None: the member's
    own series), and its gap (%p for a GPU or member, % of the median for a port)."""

    node: str
    device: int | None
    gap: float


@dataclass
class DeviceView:
    gpus: list = field(default_factory=list)  # [GpuFigure], by node name then GPU
    ports: list = field(default_factory=list)  # [PortFigure]
    median_util: float | None = None
    slowest: GpuFigure | None = None
    bottom: list = field(default_factory=list)  # [(GpuFigure, gap to median in %p)]
    median_port_gbps: float | None = None
    slowest_port: PortFigure | None = None
    slowest_member: tuple | None = None  # (node, mean GPU util) without per-GPU rows
    joined: list = field(default_factory=list)  # names of members 방금 합류 (not ranked)
    replaced: list = field(default_factory=list)  # names of replaced members (not ranked)
    criteria: Criteria = field(default_factory=Criteria)
    # The rule's answers (``find_straggler``): None when no member is a straggler; ``judged``
    # once some member has reported for the criteria's minutes (else it cannot say yet).
    straggler: Named | None = None
    straggler_port: Named | None = None
    judged: bool = False
    ports_judged: bool = False

    @property
    def member_line(self) -> tuple | None:
        """(headline, detail) the console says of the members: the straggler, that there is
        none, or that none has reported long enough to judge; None without GPU figures."""
        c, slow = self.criteria, self.straggler
        if slow is not None:
            name = (
                _("가장 느린 멤버: %(name)s") % {"name": slow.node}
                if slow.device is None
                else _("가장 느린 멤버: %(name)s (GPU %(gpu)s)")
                % {"name": slow.node, "gpu": slow.device}
            )
            detail = _("최근 %(minutes)s분 중앙값과 %(gap)s%%p (기준 %(points)s%%p)")
            return name, detail % {
                "minutes": c.minutes,
                "gap": floatformat(slow.gap, 1),
                "points": floatformat(c.gpu_points),
            }
        if self.judged:
            detail = _("모든 멤버가 최근 %(minutes)s분 중앙값과 %(points)s%%p 이내")
            figures = {"minutes": c.minutes, "points": floatformat(c.gpu_points)}
            return _("느린 멤버 없음"), detail % figures
        if self.has_gpus or self.slowest_member:
            detail = _("멤버가 %(minutes)s분 이상 보고해야 판단합니다.")
            return _("느린 멤버 판단 전"), detail % {"minutes": c.minutes}
        return None

    @property
    def port_line(self) -> tuple | None:
        """(headline, detail) of the fabric ports, as ``member_line``; None unless judged."""
        c, slow = self.criteria, self.straggler_port
        if slow is not None:
            name = _("가장 느린 포트: %(name)s (포트 %(number)s)") % {
                "name": slow.node,
                "number": slow.device,
            }
            detail = _("최근 %(minutes)s분 중앙값과 %(gap)s%% (기준 %(percent)s%%)")
            return name, detail % {
                "minutes": c.minutes,
                "gap": floatformat(slow.gap, 0),
                "percent": floatformat(c.port_percent),
            }
        if self.ports_judged:
            detail = _("모든 포트가 최근 %(minutes)s분 중앙값과 %(percent)s%% 이내")
            figures = {"minutes": c.minutes, "percent": floatformat(c.port_percent)}
            return _("느린 포트 없음"), detail % figures
        return None

    @property
    def lines(self) -> list:
        """The member and port lines as one text each: "headline — detail"."""
        return [
            f"{head} — {detail}"
            for head, detail in filter(None, (self.member_line, self.port_line))
        ]

    @property
    def marks(self) -> dict:
        """{node name: why it is not ranked} for the heatmap's row labels."""
        marks = {name: _("방금 합류") for name in self.joined}
        marks.update({name: _("교체됨") for name in self.replaced})
        return marks

    @property
    def bottom_empty_reason(self) -> str:
        """Why 하위 5 lists nobody though the heatmap has GPUs ('' when it lists some): the
        members are all 방금 합류 (or 교체됨), or none sent a GPU utilisation."""
        if self.bottom or not self.gpus:
            return ""
        ranked_out = set(self.joined) | set(self.replaced)
        if ranked_out and {g.node for g in self.gpus} <= ranked_out:
            if not self.replaced:
                return _(
                    "멤버가 모두 방금 합류해 아직 순위를 매기지 않습니다. 멤버마다 데이터가 "
                    "%(minutes)d분 넘게 쌓이면 표시됩니다."
                ) % {"minutes": JOINED_SECONDS // 60}
            return _(
                "순위에 넣을 멤버가 없습니다. 방금 합류한 멤버와 교체된 멤버는 순위에 넣지 "
                "않습니다."
            )
        return _("이 기간에 GPU 사용률을 보낸 멤버가 없습니다.")

    @property
    def has_gpus(self) -> bool:
        return self.slowest is not None

    @property
    def slowest_gap(self) -> float | None:
        """The slowest GPU's (or member's) utilisation minus the median, in points."""
        if self.median_util is None:
            return None
        if self.slowest is not None and self.slowest.util is not None:
            return self.slowest.util - self.median_util
        if self.slowest_member is not None:
            return self.slowest_member[1] - self.median_util
        return None


def cluster_view(cluster, seconds: int) -> DeviceView:
    """``device_view`` of ``cluster``'s members (and those a 교체 took out) over the last
    ``seconds``, judged by its criteria: what the 메트릭 tab and the API show."""
    members, replaced = charts.members_over(cluster, seconds)
    return device_view(members, seconds, replaced=replaced, criteria=criteria_for(cluster))


def device_view(
    members: list,
    seconds: int,
    now: datetime | None = None,
    replaced=None,
    criteria: Criteria | None = None,
) -> DeviceView:
    """The per-device figures of ``members`` ([(vm_id, name)]) over the last ``seconds``;
    those of ``replaced`` ({vm_id: when it left}, figures up to then) and the ones 방금 합류
    are shown but not ranked. The straggler (``judge``) by ``criteria``, default the
    defaults."""
    view = DeviceView(criteria=criteria or Criteria())
    replaced = replaced or {}
    if not members:
        return view
    now = now or timezone.now()
    names = dict(members)
    start, upto = now - timedelta(seconds=seconds), series_sql.rolled_up_to()
    parts = series_sql.pieces(start, now, upto, "hour")
    order = {vm_id: index for index, (vm_id, _name) in enumerate(members)}
    # Minutes at the coarsest: an hour rollup would make three minutes of samples an hour.
    spans = series_sql.fetch_spans(HOST, series_sql.pieces(start, now, upto, "minute"), list(names))
    joined = {
        vm_id for vm_id, span in spans.items() if span < JOINED_SECONDS and vm_id not in replaced
    }
    view.joined = [names[vm_id] for vm_id, _n in members if vm_id in joined]
    view.replaced = [names[vm_id] for vm_id, _n in members if vm_id in replaced]
    unranked = joined | set(replaced)
    gpu_rows = series_sql.fetch_means(GPU, parts, names, HEATMAP_METRICS, replaced)
    for _b, vm_id, gpu, util, temp, power in gpu_rows:
        view.gpus.append(GpuFigure(vm_id, names[vm_id], gpu, util, temp, power))
    view.gpus.sort(key=lambda g: (order[g.vm_id], g.gpu))
    for _b, vm_id, port, rx, tx, rate in series_sql.fetch_means(
        PORT, parts, names, PORT_METRICS, replaced
    ):
        view.ports.append(PortFigure(vm_id, names[vm_id], port, _gbps(rx), _gbps(tx), rate))
    view.ports.sort(key=lambda p: (order[p.vm_id], p.port))
    measured = [g for g in view.gpus if g.util is not None and g.vm_id not in unranked]
    if measured:
        view.median_util = statistics.median(g.util for g in measured)
        ranked = sorted(measured, key=lambda g: (g.util, order[g.vm_id], g.gpu))
        view.slowest = ranked[0]
        view.bottom = [(g, g.util - view.median_util) for g in ranked[:BOTTOM]]
    else:
        _slowest_member(view, parts, names, order, unranked)
    carried = [p for p in view.ports if p.gbps is not None and p.vm_id not in unranked]
    if carried:
        view.median_port_gbps = statistics.median(p.gbps for p in carried)
        view.slowest_port = min(carried, key=lambda p: (p.gbps, order[p.vm_id], p.port))
    ranked = [vm_id for vm_id, _name in members if vm_id not in unranked]
    judge(view, names, ranked, start, now, upto)
    return view


def judge(view: DeviceView, names: dict, vm_ids: list, start, now, upto):
    """Name the straggler GPU (or member, without per-GPU rows) and port of ``vm_ids`` by
    ``view.criteria``, or none: ``find_straggler`` over each device's per-minute means in
    the whole minutes before the members' last sample (within [start, now]), twice the
    criteria's minutes back, so a minute an agent missed does not keep a member unjudged.
    ``upto``: the rollups' cursor, as the caller read it."""
    last = last_received(vm_ids)
    if last is None or last < start:
        return
    minutes = view.criteria.minutes
    stop = _minute_floor(min(last, now))
    lo = max(start, stop - timedelta(minutes=2 * minutes))
    parts = series_sql.pieces(lo, stop, upto, "minute")
    if not parts:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL jit = off")  # costs more than these aggregates
        gpus = _per_minute(cursor, GPU, parts, vm_ids, ("util",))
        if not gpus:  # agents that send no per-GPU rows: the member's mean GPU utilisation
            gpus = _per_minute(cursor, HOST, parts, vm_ids, ("gpu_util",))
        ports = _per_minute(cursor, PORT, parts, vm_ids, ("rx", "tx"))
    view.judged = any(len(values) >= minutes for values in gpus.values())
    found = find_straggler(gpus, view.criteria.gpu_points, minutes)
    if found:
        vm_id, device = found.key
        view.straggler = Named(names[vm_id], device, found.gap)
    view.ports_judged = any(len(values) >= minutes for values in ports.values())
    found = find_straggler(ports, view.criteria.port_percent, minutes, relative=True)
    if found:
        vm_id, device = found.key
        view.straggler_port = Named(names[vm_id], device, found.gap)


def _minute_floor(moment: datetime) -> datetime:
    """``moment`` down to its minute: the judged minutes are whole ones."""
    return moment.replace(second=0, microsecond=0)


def _per_minute(cursor, series, parts, vm_ids, names) -> dict:
    """{(vm_id, device or None): {minute: value}}: each device's mean per minute over
    ``parts`` (a port's value: the busier direction)."""
    sql, params = series_sql.means_sql(series, parts, list(vm_ids), 60, names)
    cursor.execute(sql, params)
    out: dict = defaultdict(dict)
    width = len(series.keys)
    for minute, *row in cursor.fetchall():
        keys, present = row[:width], [v for v in row[width:] if v is not None]
        if present:
            out[(keys[0], keys[1] if width > 1 else None)][minute] = max(present)
    return dict(out)


def _slowest_member(view, parts, names, order, unranked):
    """Agents that send no per-GPU rows (older ones): the member whose mean GPU utilisation
    is lowest, by the per-VM series (``slowest_member``, no GPU index)."""
    rows = series_sql.fetch_means(HOST, parts, names, ("gpu_util",))
    means = [
        (vm_id, util) for _b, vm_id, util in rows if util is not None and vm_id not in unranked
    ]
    if means:
        view.median_util = statistics.median(util for _vm, util in means)
        vm_id, util = min(means, key=lambda item: (item[1], order[item[0]]))
        view.slowest_member = (names[vm_id], util)


def _gbps(bytes_per_second):
    return None if bytes_per_second is None else bytes_per_second * 8 / 1e9


def link_capacity_gbps(view: DeviceView) -> float | None:
    """The members' fabric capacity: the link rates of their ports, summed."""
    rates = [p.rate_gbps for p in view.ports if p.rate_gbps]
    return sum(rates) if rates else None


def last_received(vm_ids: list) -> datetime | None:
    """When any of ``vm_ids`` last reported: one index probe per VM (newest first) on
    PostgreSQL, where max(ts) over an IN list would read every partition."""
    if not vm_ids:
        return None
    if connection.vendor != "postgresql":
        return HOST.raw._default_manager.filter(vm_id__in=vm_ids).aggregate(last=Max("ts"))["last"]
    table = HOST.raw._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT max(last.ts) FROM unnest(%s::bigint[]) AS v(id) CROSS JOIN LATERAL "  # noqa: S608 - names from the models and constants; values are parameters
            f"(SELECT ts FROM {table} WHERE vm_id = v.id ORDER BY ts DESC LIMIT 1) AS last",
            [list(vm_ids)],
        )
        return cursor.fetchone()[0]


def heatmap_figure(view: DeviceView, labels: dict) -> dict | None:
    """The node × GPU heatmap (plotly dict): one heatmap per metric of ``labels``
    ({metric: (button label, unit, colorscale, z range or None)}), utilisation shown,
    the others a button away. Nodes top to bottom in member order."""
    if not view.gpus:
        return None
    marks = view.marks
    nodes, columns = [], sorted({g.gpu for g in view.gpus})
    cells: dict = {}
    for g in view.gpus:
        if g.node not in cells:
            nodes.append(g.node)
            cells[g.node] = {}
        cells[g.node][g.gpu] = g
    # The GPU's index alone under an axis titled GPU: eight "GPU n" labels did not fit a
    # phone's plot width, and plotly turned them on end.
    x = [str(index) for index in columns]
    y = [f"{node} ({marks[node]})" if node in marks else node for node in nodes]
    traces, buttons = [], []
    for position, (metric, (label, unit, scale, z_range)) in enumerate(labels.items()):
        z = [
            [_rounded(getattr(cells[node].get(index), metric, None)) for index in columns]
            for node in nodes
        ]
        trace = {
            "type": "heatmap",
            "x": x,
            "y": y,
            "z": z,
            "name": label,
            "visible": position == 0,
            "colorscale": scale,
            "colorbar": {"title": {"text": unit}, "thickness": 10},
            "hovertemplate": f"%{{y}} · GPU %{{x}}: %{{z}} {unit}<extra></extra>",
            "xgap": 1,
            "ygap": 1,
        }
        if z_range:
            trace["zmin"], trace["zmax"] = z_range
        traces.append(trace)
        buttons.append(
            {
                "label": label,
                "method": "restyle",
                "args": [{"visible": [i == position for i in range(len(labels))]}],
            }
        )
    layout = {
        "height": min(max(120 + 18 * len(nodes), 220), 900),
        "margin": {"l": 8, "r": 8, "t": 44, "b": 40},
        "xaxis": {
            "type": "category",
            "title": {"text": "GPU", "standoff": 4},
            "tickangle": 0,
            "tickfont": {"size": 12},
        },
        "yaxis": {
            "autorange": "reversed",
            "type": "category",
            "automargin": True,
            "tickfont": {"size": 12},
        },
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "right",
                "buttons": buttons,
                "x": 0,
                "xanchor": "left",
                "y": 1.02,
                "yanchor": "bottom",
                "pad": {"b": 4},
                "showactive": True,
            }
        ],
    }
    return {"data": traces, "layout": layout}


def _rounded(value):
    return None if value is None else round(value, 1)
