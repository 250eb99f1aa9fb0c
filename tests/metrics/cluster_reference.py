"""The cluster rollups and the cluster chart lines computed here, in Python, from the raw
samples alone: the independent answer ``metrics.models.cluster`` and
``metrics.storage.cluster_series``
are checked against.

A record is ``(vm_id, ts, cluster_id, {metric: value or None})``: the cluster is the one the
VM was in when the sample was written. Ports are ``(vm_id, ts, port, rate_gbps)``.
"""

import math
import statistics
from collections import defaultdict

METRICS = (
    "gpu_util",
    "gpu_mem_util",
    "cpu_util",
    "mem_util",
    "net_rx",
    "net_tx",
    "fabric_rx",
    "fabric_tx",
    "link_gbps",
)
HOST = METRICS[:-1]


def minute_of(ts):
    return int(ts.timestamp()) // 60 * 60


def member_minutes(records, ports=()):
    """{(cluster, minute start epoch): {vm: {metric: the member's minute value}}}: each
    member's mean over its samples of the minute (no value: no key), its link rate the sum
    of its ports' minute means, for the members that reported host samples in the minute."""
    host = defaultdict(lambda: defaultdict(list))
    for vm_id, ts, cluster_id, values in records:
        if cluster_id is None:
            continue
        for name in HOST:
            if values.get(name) is not None:
                host[(cluster_id, minute_of(ts), vm_id)][name].append(values[name])
        host[(cluster_id, minute_of(ts), vm_id)]  # a member reports even with all nulls
    rates = defaultdict(list)
    for vm_id, ts, port, rate in ports:
        if rate is not None:
            rates[(vm_id, minute_of(ts), port)].append(rate)
    links = defaultdict(float)
    for (vm_id, minute, _port), values in rates.items():
        links[(vm_id, minute)] += statistics.fmean(values)
    out = defaultdict(dict)
    for (cluster_id, minute, vm_id), series in host.items():
        values = {name: statistics.fmean(v) for name, v in series.items()}
        if (vm_id, minute) in links:
            values["link_gbps"] = links[(vm_id, minute)]
        out[(cluster_id, minute)][vm_id] = values
    return out


def minute_rows(records, ports=()):
    """{(cluster, minute): {column: value}}: what a cluster minute rollup row holds."""
    rows = {}
    for key, members in member_minutes(records, ports).items():
        row = {
            "members_peak": len(members),
            "gpu_peak": sum(1 for m in members.values() if "gpu_util" in m),
        }
        for name in METRICS:
            values = [m[name] for m in members.values() if name in m]
            row[f"{name}_n"] = len(values)
            row[f"{name}_minutes"] = 1 if values else 0
            row[f"{name}_sum"] = sum(values) if values else None
            row[f"{name}_sumsq"] = sum(v * v for v in values) if values else None
            row[f"{name}_minsum"] = min(values) if values else None
            row[f"{name}_maxsum"] = max(values) if values else None
        rows[key] = row
    return rows


def combine(rows):
    """The sum of rollup rows (peaks: the highest), as an hour row or a chart bucket has it."""
    total = {}
    for row in rows:
        for column, value in row.items():
            if value is None:
                continue
            if column.endswith("_peak"):
                total[column] = max(total.get(column, 0), value)
            else:
                total[column] = total.get(column, 0) + value
    return total


def hour_rows(minutes):
    by_hour = defaultdict(list)
    for (cluster_id, minute), row in minutes.items():
        by_hour[(cluster_id, minute // 3600 * 3600)].append(row)
    return {key: combine(rows) for key, rows in by_hour.items()}


def _ratio(row, top, bottom):
    if not row.get(bottom) or row.get(top) is None:
        return None
    return row[top] / row[bottom]


def drawn(row):
    """The chart's values of one bucket's combined row, by series name."""
    mean = _ratio(row, "gpu_util_sum", "gpu_util_n")
    square = _ratio(row, "gpu_util_sumsq", "gpu_util_n")
    out = {
        "gpu_util": mean,
        "gpu_util_min": _ratio(row, "gpu_util_minsum", "gpu_util_minutes"),
        "gpu_util_max": _ratio(row, "gpu_util_maxsum", "gpu_util_minutes"),
        "gpu_util_spread": None if mean is None else math.sqrt(max(square - mean * mean, 0)),
        "reporting": row.get("members_peak"),
        "reporting_gpu": row.get("gpu_peak"),
    }
    for name in ("gpu_mem_util", "cpu_util", "mem_util"):
        out[name] = _ratio(row, f"{name}_sum", f"{name}_n")
    for name in ("net_rx", "net_tx", "fabric_rx", "fabric_tx", "link_gbps"):
        out[name] = _ratio(row, f"{name}_sum", f"{name}_minutes")
    return out


def chart(records, cluster_id, step, ports=()):
    """{bucket number: {series: value}} of ``cluster_id``'s lines at ``step`` seconds."""
    buckets = defaultdict(list)
    for (cluster, minute), row in minute_rows(records, ports).items():
        if cluster == cluster_id:
            buckets[minute // step].append(row)
    return {b: drawn(combine(rows)) for b, rows in buckets.items()}
