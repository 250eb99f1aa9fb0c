"""``manage.py bench_ingest_fleet``: the metrics ingest at fleet rate (issue #42, item 2).

The target fleet: 8,000 members, each posting one sample (the host, 8 GPUs, 4 ports: 13 rows)
every 10 s, 800 POSTs/s. In a scratch database of its own (``tests.bench.scratch``):

1. ``--vms`` running members in clusters of 16, each with an agent token;
2. the rollup task's run at that density: 10-second samples of every member generated in SQL
   over the rollup's late window, then ``metrics.tasks.rollup`` run as beat runs it every
   minute (its cursor one minute behind: one new minute, the late window redone), timed;
3. per ``--workers`` count (1, 2, 4): gunicorn on loopback, and an open-loop load of
   agent-sized POSTs (``tests.bench.fleet_load``, a process of its own) round robin over
   as many tokens as post every 10 s at the step's rate (a member's agent), stepped up
   through ``--rates`` until a step no longer holds; per step the offered and achieved
   POSTs/s, latency p50/p95/max counted from when each request was due, the CPU per POST
   of gunicorn, PostgreSQL and the load, each process's memory (PSS) and the load average. A step
   **holds** when every POST answered 200, the achieved rate is within 5 % of the offered
   and p95 ≤ ``HELD_P95_MS``; the knee is the last step that held;
4. raw binary COPY of the same rows (host, 8 GPU and 4 port rows a sample, 1,000 samples a
   transaction, committed as the ingest commits) on the same database: the physical limit,
   against the rows/s the ingest wrote at its knee;
5. partitions and retention over simulated days: ``--week-vms`` members' samples written a
   day at a time from a month ahead, each day followed by the real ``storage.maintain`` and
   ``storage.rollup`` at that day's end (and a VACUUM, what autovacuum does in a day); the
   database's size after each day, and per member-day, scaled to the fleet.

It is a development tool (not part of CI); ``tests/bench/test_bench_ingest_fleet.py`` runs it
at a tiny size. The figures go to docs/performance.md, the arithmetic to docs/scale.md.
"""

import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from unittest import mock

import psutil
import psycopg
from django.conf import settings
from django.db import connection
from django.utils import timezone

from metrics import conf, storage, tasks
from metrics.models import (
    SERIES,
    ClusterHourRollup,
    ClusterMinuteRollup,
    RollupBacklog,
    RollupCursor,
)
from metrics.storage import binary
from metrics.storage.rollups import CLOSE_GRACE, CURSOR, LATE_WINDOW, floor_to
from metrics.storage.writes import COPY_SQL, DEVICES, _copy_sql
from tests.bench import devices, samples
from tests.bench.command import BenchCommand
from tests.bench.ingest_clients import in_threads
from tests.bench.processes import Children, cpu_seconds, database_backend_pids, serve_ingest
from tests.bench.scratch import database_url
from tests.bench.worlds import fleet_world

FLEET = 8000
TARGET_RATE = 800  # POSTs/s: 8,000 members every 10 s
INTERVAL = samples.INTERVAL  # seconds between two samples of an agent
ROWS_PER_POST = 1 + devices.GPUS + devices.PORTS
HELD_P95_MS = 250  # an agent-sized POST alone takes a few ms: a p95 past this is a queue
TARGETS = {"copy": 0.5, "rollup_s": 60.0}
COPY_BATCH = 1000  # samples per COPY transaction


def percentile(values, q):
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# What a rollup run spends its time in (``timed``): module, function.
ROLLUP_PARTS = {
    "per-VM minutes": ("metrics.storage.rollups", "roll_minutes"),
    "per-VM hours": ("metrics.storage.rollups", "roll_hours"),
    "cluster minutes": ("metrics.storage.cluster_rollup", "roll_minutes"),
    "cluster hours": ("metrics.storage.cluster_rollup", "roll_hours"),
    "device events": ("metrics.storage.events", "detect"),
}


@contextmanager
def timed(totals):
    """Add the seconds spent in each of ``ROLLUP_PARTS`` to ``totals`` while inside."""
    with ExitStack() as stack:
        for name, (module, function) in ROLLUP_PARTS.items():
            original = getattr(importlib.import_module(module), function)
            stack.enter_context(
                mock.patch(f"{module}.{function}", side_effect=_adding(totals, name, original))
            )
        yield


def _adding(totals, name, function):
    def call(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - started

    return call


def met(ok):
    return "met" if ok else "missed"


class Command(BenchCommand):
    help = "Benchmark the metrics ingest at fleet rate on PostgreSQL; prints the figures."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--vms", type=int, default=FLEET, help="members with a token")
        parser.add_argument(
            "--rates", default="25,50,100,150,200,300,400,600,800,1000",
            help="offered POSTs/s, stepped up (comma-separated)",
        )  # fmt: skip
        parser.add_argument("--seconds", type=float, default=10.0, help="per step")
        parser.add_argument("--workers", default="1,2,4", help="gunicorn worker counts")
        parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker")
        parser.add_argument("--connections", type=int, default=64, help="load's connections")
        parser.add_argument("--copy-seconds", type=float, default=6.0)
        parser.add_argument("--rollup-runs", type=int, default=3)
        parser.add_argument("--week-vms", type=int, default=16, help="members simulated")
        parser.add_argument("--week-days", type=int, default=10, help="days simulated")

    def refusal(self, opts):
        try:
            rates = [float(r) for r in opts["rates"].split(",")]
            workers = [int(w) for w in opts["workers"].split(",")]
        except ValueError:
            return "--rates and --workers take comma-separated numbers"
        if min(rates) <= 0 or min(workers) < 1 or opts["vms"] < 1:
            return "rates, workers and --vms must be positive"
        if opts["week_vms"] > opts["vms"] or opts["week_days"] < 1:
            return "--week-vms must be at most --vms, --week-days at least 1"
        return ""

    @contextmanager
    def around(self):
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as workdir:
            self.children = Children(Path(workdir))
            try:
                yield
            finally:
                self.children.stop()

    def load(self):
        return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())

    # -----------------------------------------------------------------------------------------

    def run_bench(self):
        self.say(
            f"{os.cpu_count()} CPUs, {self.load()}; cache: {settings.CACHES['default']['BACKEND']}"
        )
        t0 = time.perf_counter()
        vms, tokens = fleet_world(self.opts["vms"])
        self.say(f"{len(vms):,} members with tokens in {time.perf_counter() - t0:.1f} s")
        rollup_s = self.bench_rollup(vms)
        knees = {}
        for workers in [int(w) for w in self.opts["workers"].split(",")]:
            knees[workers] = self.bench_http(workers, tokens)
        copy_rows = self.bench_copy(vms)
        week = self.bench_week(vms[: self.opts["week_vms"]])
        self.summary(knees, copy_rows, rollup_s, week)

    def summary(self, knees, copy_rows, rollup_s, week):
        self.say("")
        self.say(f"== summary ({self.load()} on {os.cpu_count()} CPUs) ==")
        for workers, knee in knees.items():
            if knee is None:
                self.say(f"{workers} worker(s): no step held (lower --rates)")
                continue
            self.say(
                f"{workers} worker(s): holds {knee['achieved']:,.0f} POSTs/s "
                f"(step {knee['rate']:g}; p50 {knee['p50']:.1f} ms, p95 {knee['p95']:.1f} ms); "
                f"CPU per POST {knee['cpu']['gunicorn']:.2f} gunicorn + "
                f"{knee['cpu']['database']:.2f} database ms"
            )
        held = [k for k in knees.values() if k]
        if held:
            best = max(held, key=lambda k: k["achieved"])
            rows = best["achieved"] * ROWS_PER_POST
            ratio = rows / copy_rows
            self.say(
                f"rows/s at the best knee / raw COPY    : {rows:,.0f} / {copy_rows:,.0f} = "
                f"{ratio:.3f}  (>= {TARGETS['copy']}: {met(ratio >= TARGETS['copy'])})"
            )
            per_post = best["cpu"]["gunicorn"] + best["cpu"]["database"]
            self.say(
                f"CPU per POST at that knee              : {per_post:.2f} ms "
                f"(web {best['cpu']['gunicorn']:.2f}, database {best['cpu']['database']:.2f}): "
                f"{TARGET_RATE} POSTs/s = {TARGET_RATE * best['cpu']['gunicorn'] / 1000:.1f} web "
                f"cores + {TARGET_RATE * best['cpu']['database'] / 1000:.1f} database cores"
            )
        self.say(
            f"rollup task run at {self.opts['vms']:,} members     : {rollup_s:.1f} s a minute's "
            f"run (<= {TARGETS['rollup_s']:g} s: {met(rollup_s <= TARGETS['rollup_s'])});"
            f" lag {CLOSE_GRACE.seconds} s grace + up to 60 s beat + the run"
        )
        shown = [week[0], week[min(6, len(week) - 1)], week[-1]]
        scale = FLEET / self.opts["week_vms"]
        db, metrics = ([day[key] / 2**20 for day in shown] for key in ("db", "metrics"))
        fleet = [size * scale / 1024 for size in metrics]
        self.say(
            f"database after day 1 / {min(7, len(week))} / {len(week)} "
            f"({self.opts['week_vms']} members): "
            f"{' / '.join(f'{x:,.0f}' for x in db)} MiB, of it metrics "
            f"{' / '.join(f'{x:,.0f}' for x in metrics)} MiB; at {FLEET:,} members "
            f"(x{scale:g}): {' / '.join(f'{x:,.0f}' for x in fleet)} GiB"
        )

    # -----------------------------------------------------------------------------------------
    # The rollup task

    def bench_rollup(self, vms):
        """Seconds of one ``metrics.tasks.rollup`` run in the steady state at ``vms``' density:
        the median of ``--rollup-runs``."""
        now = timezone.now()
        end = floor_to(now - CLOSE_GRACE, 60)
        start = end - LATE_WINDOW - timedelta(minutes=2)
        storage.maintain(now)
        # Three minutes past the closed ones: each run's window is full whenever it starts.
        self.say(f"rollup: {len(vms):,} members x 10 min of samples …")
        samples.write(vms, start, end + timedelta(minutes=3), self.say)
        with connection.cursor() as cursor:
            for series in SERIES:
                cursor.execute(f"ANALYZE {series.raw._meta.db_table}")
        runs, parts = [], {name: 0.0 for name in ROLLUP_PARTS}
        for _run in range(self.opts["rollup_runs"]):
            closed = floor_to(timezone.now() - CLOSE_GRACE, 60)
            RollupCursor.objects.update_or_create(
                name=CURSOR, defaults={"upto": closed - timedelta(minutes=1)}
            )
            before = time.perf_counter()
            with timed(parts):
                tasks.rollup()
            runs.append(time.perf_counter() - before)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        share = ", ".join(f"{name} {seconds / len(runs):.1f}" for name, seconds in parts.items())
        self.say(
            f"  metrics.tasks.rollup, one new minute + {LATE_WINDOW.seconds // 60} min late "
            f"window: {', '.join(f'{r:.2f}' for r in runs)} s ({self.load()}; this process's "
            f"max RSS {rss:.0f} MiB); a run's s: {share}"
        )
        return statistics.median(runs)

    # -----------------------------------------------------------------------------------------
    # HTTP

    def bench_http(self, workers, tokens):
        """Step the offered rate up against ``workers`` gunicorn workers; returns the last step
        that held (or None)."""
        self.say("")
        address = serve_ingest(self.children, workers, self.opts["threads"], self.say)
        knee = None
        try:
            # Every worker's first requests (imports, pool, prepared statements) before the
            # clock: with 2 s in all, 4 workers' first step measured their start-up (p95 3-4 s).
            self.step(address, tokens, min(50.0, self.rates()[0]), 2.0 * workers)
            self.say(
                "  offered  achieved    p50     p95     max   CPU ms/POST gunicorn+db+load  "
                "PSS MiB gunicorn (master, workers) / db backends / load RSS   load avg"
            )
            for rate in self.rates():
                result = self.step(address, tokens, rate, self.opts["seconds"])
                self.say(self.step_line(result))
                if not result["held"]:
                    break
                knee = result
        finally:
            self.children.stop()
        return knee

    def rates(self):
        return [float(r) for r in self.opts["rates"].split(",")]

    def step(self, address, tokens, rate, seconds):
        config = {
            "host": address[0],
            "port": address[1],
            # As many members as post every 10 s at this rate (past the tokens, more often).
            "tokens": tokens[: max(1, int(rate * INTERVAL))],
            "rate": rate,
            "seconds": seconds,
            "connections": self.opts["connections"],
            "devices": devices.agent_devices(),
        }
        pids = {"gunicorn": self.children.pids(), "database": database_backend_pids()}
        before = {role: cpu_seconds(p) for role, p in pids.items()}
        client = subprocess.run(
            [sys.executable, "-m", "tests.bench.fleet_load"],
            cwd=settings.BASE_DIR,
            input=json.dumps(config),
            capture_output=True,
            text=True,
            check=True,
        )
        pids["database"] = database_backend_pids()
        after = {role: cpu_seconds(p) for role, p in pids.items()}
        rss = {role: self.rss(p) for role, p in pids.items()}
        out = json.loads(client.stdout)
        latencies = sorted(x for x in out["latencies"] if x >= 0)
        done = len(latencies)
        achieved = done / out["elapsed"]
        cpu = {
            role: 1000
            * sum(after[role].get(pid, 0) - before[role].get(pid, 0) for pid in after[role])
            / max(done, 1)
            for role in pids
        }
        cpu["load"] = 1000 * out["cpu"] / max(done, 1)
        result = {
            "rate": rate,
            "achieved": achieved,
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "max": latencies[-1] if latencies else 0.0,
            "failed": out["failed"],
            "failures": out["failures"],
            "cpu": cpu,
            "rss": rss,
            "load_rss": out["rss"],
            "loadavg": os.getloadavg()[0],
        }
        result["held"] = (
            not out["failed"] and achieved >= 0.95 * rate and result["p95"] <= HELD_P95_MS
        )
        return result

    @staticmethod
    def rss(pids):
        """MiB of each process's memory: its PSS (proportional set size), which shares the
        pages a forked gunicorn worker or PostgreSQL backend has in common among those that
        map them, so that a sum is memory really used (RSS counts shared buffers in each)."""
        sizes = []
        for pid in pids:
            try:
                sizes.append(psutil.Process(pid).memory_full_info().pss / 2**20)
            except psutil.NoSuchProcess:
                continue
        return sizes

    @staticmethod
    def step_line(r):
        gunicorn = r["rss"]["gunicorn"]
        database = r["rss"]["database"]
        shown = (
            f"{gunicorn[0]:.0f}, {'/'.join(f'{x:.0f}' for x in gunicorn[1:])}" if gunicorn else "-"
        )
        line = (
            f"  {r['rate']:7.0f} {r['achieved']:9.1f} {r['p50']:6.1f} {r['p95']:7.1f} "
            f"{r['max']:7.0f}   {r['cpu']['gunicorn']:.2f}+{r['cpu']['database']:.2f}+"
            f"{r['cpu']['load']:.2f}             ({shown}) / {sum(database):.0f} in "
            f"{len(database)} / {r['load_rss']:.0f}   {r['loadavg']:.1f}"
            f"  {'held' if r['held'] else 'NOT HELD'}"
        )
        if r["failed"]:
            line += f"  {r['failed']} failed: {r['failures'][:2]}"
        return line

    # -----------------------------------------------------------------------------------------
    # Raw COPY

    def bench_copy(self, vms):
        """Rows/s of a raw binary COPY of agent-sized samples (host, GPU and port rows), from
        as many streams as CPUs, ``COPY_BATCH`` samples a transaction, committed
        asynchronously as the ingest commits."""
        streams = os.cpu_count() or 1
        vm_ids = [vm.pk for vm in vms]
        clusters = [vm.cluster_id for vm in vms]
        gpus, ports = devices.agent_devices()
        host = [31.25, 42.5, 96.5, 78.25, 55012345.5, 6012345.5, 20123456789.5, 21123456789.5]
        gpu_values = [[g[k] for g in gpus] for k in DEVICES["gpu"].names]
        port_values = [[p[k] for p in ports] for k in DEVICES["port"].names]
        base = int(time.time() * 1e6) - 3 * 86400 * 10**6  # clear of the other rows

        def payloads(stream, n):
            """One transaction's rows: ``COPY_BATCH`` samples of distinct (vm, ts)."""
            ids = [vm_ids[i % len(vm_ids)] for i in range(COPY_BATCH)]
            stamps = [
                base + (n * streams + stream) * 1000 + i // len(vm_ids) for i in range(COPY_BATCH)
            ]
            cluster_ids = [clusters[i % len(vm_ids)] for i in range(COPY_BATCH)]
            data = [
                (
                    COPY_SQL,
                    binary.pack(ids, stamps, None, [[v] * COPY_BATCH for v in host], cluster_ids),
                )
            ]
            for name, count, values in (
                ("gpu", devices.GPUS, gpu_values),
                ("port", devices.PORTS, port_values),
            ):
                data.append((
                    _copy_sql(DEVICES[name]),
                    binary.pack(
                        [x for x in ids for _d in range(count)],
                        [s for s in stamps for _d in range(count)],
                        list(range(count)) * COPY_BATCH,
                        [column * COPY_BATCH for column in values],
                    ),
                ))  # fmt: skip
            return data

        rounds = 50  # transactions a stream at most: prepared ahead, ~1.3 MB each
        prepared = [[payloads(s, n) for n in range(rounds)] for s in range(streams)]
        conns = [psycopg.connect(database_url(), autocommit=True) for _ in range(streams)]
        counts = [0] * streams
        stop = time.monotonic() + self.opts["copy_seconds"]
        before = cpu_seconds(database_backend_pids())
        cpu0 = time.process_time()

        def copier(index):
            conn = conns[index]
            for data in prepared[index]:
                if time.monotonic() > stop:
                    return
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SET LOCAL synchronous_commit = off")
                    for sql, payload in data:
                        with cur.copy(sql) as copy:
                            copy.write(payload)
                counts[index] += 1

        try:
            done, elapsed = in_threads(copier, counts)
        finally:
            for conn in conns:
                conn.close()
        after = cpu_seconds(database_backend_pids())
        rows = done * COPY_BATCH * ROWS_PER_POST
        db_cpu = sum(after.get(pid, 0) - before.get(pid, 0) for pid in after)
        self.say("")
        per_sample = 1000 / (done * COPY_BATCH)  # ms per sample of a CPU second
        self.say(
            f"raw binary COPY, {streams} streams, {COPY_BATCH} samples "
            f"({COPY_BATCH * ROWS_PER_POST:,} rows) a transaction: {rows / elapsed:,.0f} rows/s "
            f"= {rows / elapsed / ROWS_PER_POST:,.0f} samples/s; CPU per sample "
            f"{db_cpu * per_sample:.3f} database + {(time.process_time() - cpu0) * per_sample:.3f}"
            f" client ms ({self.load()})"
        )
        return rows / elapsed

    # -----------------------------------------------------------------------------------------
    # Partitions and retention over simulated days

    def bench_week(self, vms):
        """Write ``--week-days`` days of ``vms``' samples a day at a time, from a month
        ahead (clear of the rows written so far, which go first), each followed by
        ``storage.maintain`` and ``storage.rollup`` at the day's end; the sizes after each."""
        self.say("")
        with connection.cursor() as cursor:
            for series in SERIES:
                for model in (series.raw, series.minute, series.hour):
                    cursor.execute(f"TRUNCATE {model._meta.db_table} CASCADE")
            for table in (ClusterMinuteRollup, ClusterHourRollup, RollupBacklog):
                cursor.execute(f"TRUNCATE {table._meta.db_table}")
        RollupCursor.objects.all().delete()
        first = floor_to(timezone.now() + timedelta(days=30), 86400)
        self.say(
            f"simulated days: {len(vms)} members from {first:%Y-%m-%d} (raw retention "
            f"{conf.get('METRICS_RAW_RETENTION_DAYS')} d, minute "
            f"{conf.get('METRICS_MINUTE_RETENTION_DAYS')} d, hour "
            f"{conf.get('METRICS_HOUR_RETENTION_DAYS')} d)"
        )
        self.say(
            "  day  database MiB  metrics MiB (raw / rollups)  partitions  "
            "write + maintain and rollup + vacuum s"
        )
        days = []
        for day in range(self.opts["week_days"]):
            start = first + timedelta(days=day)
            end = start + timedelta(days=1)
            t0 = time.perf_counter()
            storage.maintain(start)
            samples.write(vms, start, end, quiet)  # no per-table lines every day
            t1 = time.perf_counter()
            storage.maintain(end)
            storage.rollup(end)
            t2 = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")
            sizes = self.sizes()
            sizes["seconds"] = (t1 - t0, t2 - t1, time.perf_counter() - t2)
            days.append(sizes)
            self.say(
                f"  {day + 1:3d}  {sizes['db'] / 2**20:12,.0f}  {sizes['metrics'] / 2**20:11,.0f} "
                f"({sizes['raw'] / 2**20:,.0f} / {sizes['rollups'] / 2**20:,.0f})  "
                f"{sizes['partitions']:10d}  {'+'.join(f'{x:.1f}' for x in sizes['seconds'])}"
            )
        return days

    @staticmethod
    def sizes():
        """Bytes of the database, of the raw samples' partitions and of the rollups, and
        the partitions' count."""
        with connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT pg_database_size(current_database()),
                       coalesce(sum(pg_total_relation_size(c.oid))
                                FILTER (WHERE i.inhparent IS NOT NULL), 0),
                       coalesce(sum(pg_total_relation_size(c.oid))
                                FILTER (WHERE i.inhparent IS NULL AND c.relname LIKE '%rollup'), 0),
                       count(*) FILTER (WHERE i.inhparent IS NOT NULL)
                FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
                WHERE c.relkind = 'r' AND c.relname LIKE 'metrics\\_%'
                """
            )
            db, raw, rollups, partitions = map(int, cursor.fetchone())
        return {
            "db": db,
            "raw": raw,
            "rollups": rollups,
            "metrics": raw + rollups,
            "partitions": partitions,
        }


def quiet(_text):
    """``say`` for the simulated days' writes: no per-table lines every day."""
