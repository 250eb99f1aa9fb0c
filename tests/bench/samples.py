"""The metrics benchmarks' samples: every member's 10-second host, GPU and port rows over a
span up to now, generated in bulk in SQL in the order agents send them, then rolled up
(bench_metrics, bench_first_chart)."""

import time
from datetime import UTC, timedelta

from django.db import connection

from metrics import storage
from tests.bench import devices

INTERVAL = 10


def write(vms, start, end, say, cluster_id=None) -> int:
    """The host rows (a training-like profile: busy GPUs, a checkpoint dip every 10 minutes)
    and the GPU and port rows (``devices``) of ``vms`` every 10 s of [start, end), in the
    order agents send them; each host row stamped ``cluster_id``, or its VM's own cluster
    if None. The day partitions must exist. Returns the rows written."""
    grid, grid_params = devices.time_major(vms, start, end, INTERVAL)
    stamp = (
        "%s"
        if cluster_id is not None
        else "(SELECT cluster_id FROM vms_virtualmachine WHERE id = v)"
    )
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO metrics_sample (vm_id, ts, cpu_util, mem_util, gpu_util,
                                        gpu_mem_util, net_rx, net_tx, fabric_rx,
                                        fabric_tx, cluster_id)
            SELECT v, t,
                   25 + 10 * random(), 40 + 5 * random(),
                   CASE WHEN extract(epoch FROM t)::bigint %% 600 < 30 THEN 15 + 10 * random()
                        ELSE 88 + 10 * random() END,
                   75 + 5 * random(),
                   6e7 * random(), 6e6 * random(), 2e10 * random(), 2e10 * random(), {stamp}
            FROM """
            + grid,
            [*([cluster_id] if cluster_id is not None else []), *grid_params],
        )
        rows = cursor.rowcount
    generated = time.perf_counter() - t0
    say(f"  {rows:,} rows in {generated:.1f} s ({rows / generated:,.0f} rows/s)")
    return rows + devices.generate(vms, start, end, INTERVAL, say)


def generate(cluster, vms, now, span, say, *, rollup=True):
    """``span`` of 10-second samples of ``vms`` up to ``now``, host rows (a training-like
    profile) and 8 GPU and 4 port rows each (``devices``), rolled up and analysed (without
    ``rollup``, left for a later call's: the rollup moves one watermark for all clusters);
    prints times and sizes through ``say``."""
    end = now.replace(microsecond=0)
    start = end - span
    storage.ensure_partitions(
        {(start + timedelta(days=d)).astimezone(UTC).date() for d in range(span.days + 2)}
    )
    say(f"generating {len(vms)} VMs x {span} of {INTERVAL}-second samples …")
    write(vms, start, end, say, cluster.pk)
    if not rollup:
        return
    t0 = time.perf_counter()
    minutes = storage.rollup(now)
    say(f"  rollups of {minutes:,} minutes in {time.perf_counter() - t0:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE metrics_sample")
        cursor.execute("VACUUM ANALYZE metrics_minuterollup")
        cursor.execute("VACUUM ANALYZE metrics_hourrollup")
        cursor.execute("VACUUM ANALYZE metrics_clusterminuterollup")
        cursor.execute("VACUUM ANALYZE metrics_clusterhourrollup")
        cursor.execute(
            "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'metrics_sample'::regclass"
        )
        raw_size = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*), pg_size_pretty(pg_total_relation_size("
            "'metrics_minuterollup')) FROM metrics_minuterollup"
        )
        minute_rows, minute_size = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM metrics_hourrollup")
        hour_rows = cursor.fetchone()[0]
        cursor.execute(
            "SELECT (SELECT count(*) FROM metrics_clusterminuterollup), "
            "(SELECT count(*) FROM metrics_clusterhourrollup)"
        )
        cluster_minutes, cluster_hours = cursor.fetchone()
    say(
        f"  raw {raw_size}; minute rollups {minute_rows:,} rows ({minute_size}); "
        f"hour rollups {hour_rows:,} rows; cluster rollups {cluster_minutes:,} minute "
        f"and {cluster_hours:,} hour rows"
    )
