"""The 메트릭 tab's plotly figures, drawn from ``charts.ChartData``: one figure dict per panel
(aggregate lines, or one line per member), with event markers and the fabric link share.

Figures are plain dicts serialised with ``plotly.io.to_json`` (orjson) and escaped for an inline
``<script>``; building ``go.Figure`` objects per request validated every property each time."""

import plotly.io as pio
from django.utils import timezone
from django.utils.translation import gettext as _

from metrics.storage.charts import GBIT, GPU_PANELS, TICK_FORMATS


def _round(values, scale, digits):
    return [None if v is None else round(v / scale, digits) for v in values]


def _panels():
    """(id, title, y-axis title, scale, digits, y-range, aggregate traces, metric for per-member)"""
    percent = (0, 100)
    return [
        (
            "gpu",
            _("GPU 사용률"),
            _("GPU 사용률 (%)"),
            1,
            1,
            percent,
            [("gpu_util", _("멤버 평균")), ("gpu_util_min", _("가장 느린 멤버"))],
            ["gpu_util"],
        ),
        (
            "gpu-mem",
            _("GPU 메모리"),
            _("GPU 메모리 사용률 (%)"),
            1,
            1,
            percent,
            [("gpu_mem_util", _("멤버 평균"))],
            ["gpu_mem_util"],
        ),
        (
            "cpu",
            _("CPU"),
            _("CPU 사용률 (%)"),
            1,
            1,
            percent,
            [("cpu_util", _("멤버 평균"))],
            ["cpu_util"],
        ),
        (
            "mem",
            _("메모리"),
            _("메모리 사용률 (%)"),
            1,
            1,
            percent,
            [("mem_util", _("멤버 평균"))],
            ["mem_util"],
        ),
        (
            "net",
            _("네트워크"),
            _("네트워크 처리량 (MB/s)"),
            1e6,
            2,
            None,
            [("net_rx", _("수신 합계")), ("net_tx", _("송신 합계"))],
            ["net_rx", "net_tx"],
        ),
        (
            "fabric",
            _("패브릭"),
            _("패브릭 처리량 (Gb/s)"),
            GBIT,
            1,
            None,
            [("fabric_rx", _("수신 합계")), ("fabric_tx", _("송신 합계"))],
            ["fabric_rx", "fabric_tx"],
        ),
    ]


def figures(data, capacity_gbps=None, markers=None):
    """[{"id", "title", "figure" (plotly dict), "json"}] for the tab, x as start + step.

    ``capacity_gbps``: the members' summed link rate, for the fabric's "% of link" axis;
    ``markers``: {panel id: [(local time text, label)]} of error events to mark.
    """
    x0 = timezone.localtime(data.start).strftime("%Y-%m-%d %H:%M:%S")
    dx = data.step * 1000  # milliseconds on a date axis
    direction = {"rx": _("수신"), "tx": _("송신")}
    no_gpu = data.no_gpu()
    out = []
    for key, title, y_title, scale, digits, y_range, aggregate, metrics in _panels():
        traces = []
        if data.per_member:
            for metric in metrics:
                for vm_id, name in data.shown:
                    if vm_id in data.replaced:
                        name = _("%(name)s (교체됨)") % {"name": name}
                    label = name if len(metrics) == 1 else f"{name} {direction[metric[-2:]]}"
                    traces.append(
                        _trace(
                            label,
                            data.series[metric][vm_id],
                            scale,
                            digits,
                            x0,
                            dx,
                            dash=metric.endswith("_tx"),
                        )
                    )
        else:
            for series, label in aggregate:
                traces.append(
                    _trace(
                        label,
                        data.series[series],
                        scale,
                        digits,
                        x0,
                        dx,
                        dash=series.endswith("_min"),
                    )
                )
        layout: dict = {
            "height": 240,
            "margin": {"l": 56, "r": 12, "t": 24, "b": 40},
            "hovermode": "x unified",
            "showlegend": True,
            "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
            # Numeric formats: plotly.js ships English month names only.
            "xaxis": {
                "type": "date",
                "title": {"text": _("시각")},
                "tickformat": TICK_FORMATS[data.range_key],
                "hoverformat": "%Y-%m-%d %H:%M",
            },
            "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        }
        if y_range:
            layout["yaxis"]["range"] = list(y_range)
        if key == "fabric" and capacity_gbps and not data.per_member:
            _link_share(traces, layout, data, capacity_gbps, x0, dx)
        if markers and markers.get(key):
            traces.append(_markers(markers[key], y_range))
        figure = {"data": traces, "layout": layout}
        out.append(
            {
                "id": key,
                "title": title,
                "figure": figure,
                "note": _no_gpu_note(no_gpu) if key in GPU_PANELS else None,
                "json": script_safe(pio.to_json(figure, validate=False, engine="orjson")),
            }
        )
    return out


def _no_gpu_note(no_gpu):
    """What a GPU chart says of members that report no GPU (their lines are empty, not 0)."""
    if not no_gpu:
        return None
    if isinstance(no_gpu, list):
        return _("GPU를 보고하지 않는 멤버: %(names)s") % {"names": ", ".join(no_gpu)}
    missing, reporting = no_gpu
    if missing == reporting:
        return _("멤버가 GPU를 보고하지 않습니다 (GPU가 없는 VM)")
    return _("멤버 %(total)d대 중 %(count)d대가 GPU를 보고하지 않습니다") % {
        "total": reporting,
        "count": missing,
    }


_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_safe(json_text):
    """JSON that can sit inside <script type="application/json"> (as Django's json_script)."""
    return json_text.translate(_SCRIPT_ESCAPES)


def _link_share(traces, layout, data, capacity_gbps, x0, dx):
    """Receive and send as % of the members' link rate, on a right-hand axis."""
    for series, label in (
        ("fabric_rx", _("수신 (링크 대비 %)")),
        ("fabric_tx", _("송신 (링크 대비 %)")),
    ):
        trace = _trace(label, data.series[series], GBIT * capacity_gbps / 100, 1, x0, dx, dash=True)
        trace["yaxis"] = "y2"
        traces.append(trace)
    layout["yaxis2"] = {
        "title": {"text": _("링크 대비 (%)")},
        "overlaying": "y",
        "side": "right",
        "range": [0, 100],
        "showgrid": False,
        "tickmode": "linear",
        "tick0": 0,
        "dtick": 25,
    }
    layout["margin"]["r"] = 48


def _markers(events, y_range):
    """Error events as red crosses along the top of a % chart (along zero of a throughput
    chart), named on hover."""
    top = y_range[1] if y_range else 0
    return {
        "type": "scatter",
        "mode": "markers",
        "name": _("오류"),
        "x": [at for at, _label in events],
        "y": [top] * len(events),
        "text": [label for _at, label in events],
        "hoverinfo": "text+x",
        "marker": {"symbol": "x", "size": 10, "color": "#c62828"},
    }


def _trace(name, values, scale, digits, x0, dx, dash=False):
    """A line; with markers when a point has no neighbour to draw a line to, or there are
    only a couple (the current hour of 7일, a new cluster's 24시간), which a line alone
    leaves invisible."""
    trace = {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x0": x0,
        "dx": dx,
        "y": _round(values, scale, digits),
    }
    if _isolated(values):
        trace["mode"], trace["marker"] = "lines+markers", {"size": 6}
    if dash:
        trace["line"] = {"dash": "dot"}
    return trace


def _isolated(values) -> bool:
    """Whether some value of ``values`` has no value on either side, or there are fewer than
    three (a line that short is a pixel wide on a day's axis)."""
    if 0 < sum(v is not None for v in values) < 3:
        return True
    last = len(values) - 1
    return any(
        v is not None and (i == 0 or values[i - 1] is None) and (i == last or values[i + 1] is None)
        for i, v in enumerate(values)
    )
