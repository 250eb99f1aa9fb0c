"""Which node is slow: per-GPU and per-port figures over the chosen range, the
slowest GPU against the median, the five slowest, and the node × GPU heatmap.

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
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from metrics.models import GPU, HOST, PORT
from metrics.storage import series_sql

BOTTOM = 5
JOINED_SECONDS = 300  # less data than this in the range: 방금 합류, not ranked
HEATMAP_METRICS = ("util", "temp", "power")
PORT_METRICS = ("rx", "tx", "rate_gbps")


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


def device_view(
    members: list, seconds: int, now: datetime | None = None, replaced=None
) -> DeviceView:
    """The per-device figures of ``members`` ([(vm_id, name)]) over the last ``seconds``;
    those of ``replaced`` ({vm_id: when it left}, figures up to then) and the ones 방금 합류
    are shown but not ranked."""
    view = DeviceView()
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
    return view


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
