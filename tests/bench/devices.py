"""bench_metrics' per-device part: 8 GPUs and 4 ports per member generated in SQL beside the
host samples, an agent-sized batch with them, and the straggler view's figures (heatmap +
하위 5 over 24 h against 1 h, and their size)."""

import statistics
import time

import plotly.io as pio
from django.db import connection

from metrics.storage import straggler
from metrics.views.pages import heatmap_labels

GPUS = 8
PORTS = 4
SLOW = (3, 5)  # (member index, GPU): the bench's straggler


def time_major(vms, start, end, interval, devices=1) -> tuple[str, list]:
    """A ``FROM`` of rows (v, t, d) for every member ``v``, instant ``t`` of [start, end)
    and device ``d`` (from 0), and its parameters, in the order agents send them: instant
    by instant. A live table's physical order follows time, and the charts find their raw
    tail (the minutes the rollup has not reached) through the BRIN index on ``ts``; written
    member by member, a day each, every BRIN range spanned the day and the tail read the
    whole partition (most of the 메트릭 tab's time). One series numbered in that order,
    not a join of three, so the order does not rest on the planner's join order."""
    members = len(vms)
    instants = int((end - start).total_seconds()) // interval
    per_instant = members * devices
    sql = """(SELECT (%s::bigint[])[1 + (i / %s) %% %s] AS v,
                     %s::timestamptz + (i / %s) * %s::interval AS t,
                     i %% %s AS d
              FROM generate_series(0, %s) AS i) AS grid"""
    params = [
        [vm.pk for vm in vms],
        devices,
        members,
        start,
        per_instant,
        f"{interval} seconds",
        devices,
        instants * per_instant - 1,
    ]
    return sql, params


def generate(vms, start, end, interval, say):
    """GPU and port rows for every member and instant of [start, end), as the agent would
    send them (one member's GPU 5 slow); returns rows written."""
    say(f"  + {GPUS} GPUs and {PORTS} ports per sample …")
    t0 = time.perf_counter()
    slow_vm = vms[SLOW[0] % len(vms)].pk
    gpus, gpu_params = time_major(vms, start, end, interval, GPUS)
    ports, port_params = time_major(vms, start, end, interval, PORTS)

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO metrics_gpusample (vm_id, ts, gpu, util, mem_used, mem_total, temp,
                                           power, sm_clock, throttle, ecc_uncorrected,
                                           ecc_corrected, remapped_rows, nvlink_errors, xid)
            SELECT v, t, d,
                   CASE WHEN v = %s AND d = %s THEN 50 + 10 * random()
                        ELSE 88 + 10 * random() END,
                   62000 + 500 * random(), 81559, 60 + 15 * random(), 550 + 150 * random(),
                   1980, 0, 0, 0, 0, 0, 0
            FROM """
            + gpus,
            [slow_vm, SLOW[1], *gpu_params],
        )
        gpu_rows = cursor.rowcount
        cursor.execute(
            """
            INSERT INTO metrics_portsample (vm_id, ts, port, rx, tx, symbol_errors,
                                            link_downed, rcv_errors, state, rate_gbps)
            SELECT v, t, d, 3.8e10 * random(), 3.8e10 * random(), 0, 0, 0, 4, 400
            FROM """
            + ports,
            port_params,
        )
        port_rows = cursor.rowcount
        for table in ("metrics_gpusample", "metrics_portsample"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    elapsed = time.perf_counter() - t0
    say(f"    {gpu_rows:,} GPU rows and {port_rows:,} port rows in {elapsed:.1f} s")
    return gpu_rows + port_rows


def agent_devices():
    """One node's GPUs and ports as metrics.agent sends them (gpus, ports arrays)."""
    gpus = [
        {
            "gpu": i,
            "util": 96.5 - i,
            "mem_used": 61486.0,
            "mem_total": 81559.0,
            "temp": 61.0 + i,
            "power": 652.42,
            "sm_clock": 1980.0,
            "throttle": 0.0,
            "ecc_uncorrected": 0.0,
            "ecc_corrected": 2.0,
            "remapped_rows": 0.0,
            "nvlink_errors": 0.0,
            "xid": 0.0,
        }
        for i in range(GPUS)
    ]
    ports = [
        {
            "port": i,
            "rx": 4.61e10,
            "tx": 4.58e10,
            "symbol_errors": 0.0,
            "link_downed": 0.0,
            "rcv_errors": 0.0,
            "state": 4.0,
            "rate_gbps": 400.0,
        }
        for i in range(PORTS)
    ]
    return gpus, ports


def bench_view(cluster, say, repeats=9):
    """The straggler view (per-GPU and per-port means, heatmap, 하위 5) at 1 h and 24 h:
    (24h / 1h time, heatmap + 하위 5 bytes at 24 h)."""
    members = list(cluster.members.order_by("name", "id").values_list("pk", "name"))
    times, sizes = {}, {}
    for label, seconds in (("1h", 3600), ("24h", 86400)):
        samples = []
        for i in range(repeats + 2):
            t0 = time.perf_counter()
            view = straggler.device_view(members, seconds)
            figure = straggler.heatmap_figure(view, heatmap_labels())
            body = pio.to_json(figure, validate=False, engine="orjson")
            if i >= 2:
                samples.append(time.perf_counter() - t0)
        times[label] = statistics.median(samples)
        # The 하위 5 table is five rows of HTML: ~100 bytes each.
        sizes[label] = len(body) + 100 * len(view.bottom)
        slow = view.slowest
        say(
            f"  straggler view {label:<4} {times[label] * 1000:7.1f} ms  "
            f"{sizes[label] / 1024:6.1f} KB  slowest: {slow and slow.node} GPU "
            f"{slow and slow.gpu} ({slow and round(slow.util, 1)}% vs median "
            f"{view.median_util and round(view.median_util, 1)}%)"
        )
    return times["24h"] / times["1h"], sizes["24h"]
