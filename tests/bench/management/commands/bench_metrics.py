"""``manage.py bench_metrics``: the ingest, storage and chart figures, measured in one run.

On PostgreSQL only (the storage being measured is PostgreSQL's). It works in a scratch
database of its own (``tests.bench.scratch``: a fresh ``vc_scratch_…`` name, migrated, dropped
at the end unless ``--keep``), so it never touches the portal's data:

1. 64 running member VMs of one cluster, each with a token; 7 days of 10-second samples
   generated in bulk in SQL, then rolled up (times and sizes printed);
2. gunicorn on a free loopback port (2 workers x 4 threads, persistent DB connections) and
   keep-alive clients, for a fixed time each:
   - agent-sized batches (one sample of one 8-GPU VM): POSTs/s of the ingest endpoint over
     POSTs/s of the minimal authenticated POST view (``/api/metrics/check``), same stack;
   - backlog batches (1,000 samples): samples/s through the endpoint over samples/s of a raw
     psycopg binary COPY of the same batches into the same table, same concurrency;
3. the 메트릭 tab's server time per range (1h, 6h, 24h, 7d; aggregate and per member) and its
   per-device panel, each over the request floor measured in the same shuffled rounds
   (``tests.bench.metrics_tab``), with query counts and sizes;
4. per device: every sample also has 8 GPU and 4 port rows (``tests.bench.devices``); the
   agent-sized batch carries them; the straggler view (heatmap + 하위 5) at 24 h over 1 h and
   its size.

The tab and the straggler view are timed before the ingest measurements, which post to the
first members (the straggler among them) and would change what they read.
"""

import gzip
import logging
import os
import random
import tempfile
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import psycopg
from django.contrib.auth import get_user_model
from django.utils import timezone

from metrics.storage import COPY_SQL, PG_TYPES
from metrics.vm_agent.main import FIELDS
from tests.bench import devices, metrics_tab, samples
from tests.bench.command import BenchCommand
from tests.bench.ingest_clients import hammer, in_threads
from tests.bench.processes import Children, cpu_seconds, database_backend_pids, serve_ingest
from tests.bench.scratch import database_url
from tests.bench.worlds import metrics_world

VMS = 64
DAYS = 7
BACKLOG = 1000
ROUNDS = 6  # interleaved rounds per comparison
TARGETS = {
    "agent": 0.9,
    "backlog": 0.5,
    "chart": 1.5,
    "size_kb": 150,
    "view": 5.0,
    "tab": metrics_tab.TARGET,
}


class Command(BenchCommand):
    help = "Benchmark metrics ingest and charts on PostgreSQL; prints the figures."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--seconds", type=float, default=6.0, help="per HTTP measurement")
        parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
        parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker")
        parser.add_argument("--days", type=int, default=DAYS)
        parser.add_argument("--vms", type=int, default=VMS)

    @contextmanager
    def around(self):
        logging.getLogger("portal.foundation.audit").setLevel(logging.WARNING)  # 64 token issues
        with tempfile.TemporaryDirectory(prefix="bench-metrics-") as workdir:
            self.children = Children(Path(workdir))
            yield

    # -----------------------------------------------------------------------------------------

    def run_bench(self):
        now = timezone.now()
        cluster, vms, tokens = metrics_world(self.opts["vms"])
        self.generate(cluster, vms, now)
        tab = self.bench_charts(cluster)
        view_ratio, view_size = devices.bench_view(cluster, self.say)
        try:
            url = self.start_gunicorn()
            agent_ratio, agent_cpu_ratio = self.bench_agent_sized(url, tokens)
            backlog_ratio, backlog_cpu_ratio = self.bench_backlog(url, tokens, vms, cluster)
        finally:
            self.children.stop()
        floor = tab["floor"]["median"]
        chart_ratio = tab["tab 7d"]["median"] / tab["tab 1h"]["median"]
        largest = max(r["bytes"] for key, r in tab.items() if not key.startswith("devices"))
        self.say("")
        self.say(
            f"== summary: ratio of throughputs, and of work per CPU-second (target); "
            f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs =="
        )
        self.say(
            f"ingest agent-sized / minimal POST view : {agent_ratio:.2f}, "
            f"CPU {agent_cpu_ratio:.2f}  (>= {TARGETS['agent']})"
        )
        self.say(
            f"ingest backlog / raw COPY             : {backlog_ratio:.2f}, "
            f"CPU {backlog_cpu_ratio:.2f}  (>= {TARGETS['backlog']})"
        )
        self.say(f"request floor (login_required 'ok')   : {floor:.2f} ms")
        for key in metrics_tab.RANGES:
            row, devices_row = tab[f"tab {key}"], tab[f"devices {key}"]
            self.say(
                f"metrics tab {key:<3} server time         : {row['median']:.1f} ms = "
                f"{row['median'] / floor:.1f}x floor (<= {TARGETS['tab']:g}x), "
                f"{row['queries']} queries; device panel {devices_row['median']:.1f} ms "
                f"({devices_row['median'] / floor:.0f}x)"
            )
        self.say(
            f"metrics tab 7d / 1h server time       : {chart_ratio:.2f}  (<= {TARGETS['chart']})"
        )
        self.say(
            f"largest metrics tab response          : {largest / 1024:.1f} KB"
            f"  (<= {TARGETS['size_kb']} KB)"
        )
        self.say(
            f"heatmap + 하위 5, 24h / 1h server time : {view_ratio:.2f}  "
            f"(<= {TARGETS['view']}); 24h size {view_size / 1024:.1f} KB "
            f"(<= {TARGETS['size_kb']} KB)"
        )

    def generate(self, cluster, vms, now):
        samples.generate(cluster, vms, now, timedelta(days=self.opts["days"]), self.say)

    # -----------------------------------------------------------------------------------------
    # HTTP

    def start_gunicorn(self):
        return serve_ingest(self.children, self.opts["workers"], self.opts["threads"], self.say)

    def cpu_seconds(self):
        """{(role, pid): CPU seconds so far} of everything a measurement runs on: this
        process (the clients), gunicorn's workers, the bench database's backends."""
        roles = {
            "client": [os.getpid()],
            "gunicorn": self.children.pids(),
            "database": database_backend_pids(),
        }
        return {
            (role, pid): seconds
            for role, pids in roles.items()
            for pid, seconds in cpu_seconds(pids).items()
        }

    def interleaved(self, first, second):
        """Alternate short rounds of two measurements (``measure(round) -> (units, wall
        seconds)``), so that a change in the machine's background load hits both alike.

        Returns, for each, (units per wall second, units per CPU second, {role: CPU ms per
        unit}). CPU is what clients, gunicorn and PostgreSQL spent, whatever else the machine
        runs: on a dedicated machine of N cores, throughput approaches N x units per CPU
        second, so the ratio of those is the robust one on a shared machine.
        """
        totals = [[0, 0.0, {}], [0, 0.0, {}]]
        for round_index in range(ROUNDS):
            for total, measure in zip(totals, (first, second), strict=True):
                before = self.cpu_seconds()
                done, elapsed = measure(round_index)
                after = self.cpu_seconds()
                total[0] += done
                total[1] += elapsed
                for (role, pid), seconds in after.items():
                    spent = seconds - before.get((role, pid), 0.0)
                    total[2][role] = total[2].get(role, 0.0) + spent
        results = []
        for done, wall, by_role in totals:
            cpu = sum(by_role.values())
            split = {role: 1000 * seconds / done for role, seconds in by_role.items()}
            results.append((done / wall, done / cpu, split))
        return results

    @staticmethod
    def split(by_role):
        return (
            " + ".join(
                f"{by_role.get(role, 0.0):.2f} {role}"
                for role in ("client", "gunicorn", "database")
            )
            + " CPU ms"
        )

    @staticmethod
    def agent_row(ts):
        """One interval of an 8-GPU, 4-port VM, as metrics.agent sends it (values in FIELDS
        order: the host's, then its GPUs and ports)."""
        gpus, ports = devices.agent_devices()
        return [
            ts,
            31.25,
            42.5,
            96.5,
            78.25,
            55012345.5,
            6012345.5,
            20123456789.5,
            21123456789.5,
            gpus,
            ports,
        ]

    def bench_agent_sized(self, address, tokens):
        clients = self.opts["clients"]
        # Current samples (a late one would also queue a rollup redo), off the generated
        # whole-second grid.
        base = int(time.time()) - 30 + 0.0005  # whole second + 0.5 ms: never on the grid
        sent = [0] * clients

        def check(index, n):
            return "/api/metrics/check", b"", tokens[index]

        def ingest(index, n):
            # Each client is one VM sending one 8-GPU sample per request (distinct instants).
            sent[index] += 1
            row = self.agent_row(base + sent[index] * 0.001)
            body = orjson.dumps({"fields": FIELDS, "rows": [row]})
            return "/api/metrics/ingest", body, tokens[index]

        self.say(
            f"agent-sized batches, {clients} clients, {self.opts['seconds']:g} s each, interleaved:"
        )
        hammer(address, clients, check, 1.0)  # warm up workers and pools
        hammer(address, clients, ingest, 1.0)
        seconds = self.opts["seconds"] / ROUNDS
        (check_rate, check_cpu, check_split), (ingest_rate, ingest_cpu, ingest_split) = (
            self.interleaved(
                lambda _round: hammer(address, clients, check, seconds),
                lambda _round: hammer(address, clients, ingest, seconds),
            )
        )
        self.say(
            f"  minimal authenticated POST view : {check_rate:,.0f} POSTs/s, "
            f"{check_cpu:,.0f} per CPU-second ({self.split(check_split)} per POST)"
        )
        self.say(
            f"  ingest endpoint (host+8 GPU+4 port): {ingest_rate:,.0f} POSTs/s, "
            f"{ingest_cpu:,.0f} per CPU-second ({self.split(ingest_split)} per POST)"
        )
        return ingest_rate / check_rate, ingest_cpu / check_cpu

    def bench_backlog(self, address, tokens, vms, cluster):
        """Both sides get the same batches, the same number per round and stream: the
        endpoint as the agent sends them (compact JSON, gzipped), the raw COPY as the decoded
        rows (what a loader holds before COPY), given their VM and a datetime and written
        with psycopg's ``write_row``, committed as the endpoint commits."""
        clients = self.opts["clients"]
        per_round = 12  # batches per stream per round
        rounds = ROUNDS
        start = int(time.time()) - 6 * 86400  # whole; offsets below keep off the grid
        rng = random.Random(5)

        def batch(n, offset):
            """Rows in the agent's field order: distinct instants for every batch and side,
            figures that vary like real ones, rounded as the agent rounds them (so the gzip
            ratio is realistic)."""
            first = start + offset + n * 10.0
            return [
                [
                    round(first + j * 0.01, 4),
                    round(rng.uniform(20, 40), 2),
                    round(rng.uniform(40, 45), 2),
                    round(rng.uniform(85, 99), 2),
                    round(rng.uniform(75, 80), 2),
                    round(rng.uniform(0, 6e7), 2),
                    round(rng.uniform(0, 6e6), 2),
                    round(rng.uniform(0, 2e10), 2),
                    round(rng.uniform(0, 2e10), 2),
                ]
                for j in range(BACKLOG)
            ]

        total = per_round * rounds
        # Built ahead of the clock, so the client's own encoding does not count.
        # Host rows only: the backlog ratio is the endpoint against a COPY of the same rows.
        bodies = [
            [
                gzip.compress(
                    orjson.dumps({"fields": FIELDS[:9], "rows": batch(n, 0.0003)}),
                    compresslevel=5,
                    mtime=0,
                )
                for n in range(total)
            ]
            for _i in range(clients)
        ]
        decoded = [[batch(n, 0.0007) for n in range(total)] for _i in range(clients)]
        self.say(
            f"backlog batches of {BACKLOG} samples ({len(bodies[0][0]) // 1024} KB gzipped), "
            f"{clients} concurrent streams, {per_round} batches each per round, interleaved:"
        )

        def ingest_round(round_index):
            def request(index, n):
                if n >= per_round:
                    return None
                body = bodies[index][round_index * per_round + n]
                return "/api/metrics/ingest", body, tokens[index]

            return hammer(address, self.opts["clients"], request, 3600)

        connections = [psycopg.connect(database_url(), autocommit=True) for _ in range(clients)]

        def copy_round(round_index):
            def copier(index):
                conn, vm_id = connections[index], vms[index].pk
                for n in range(per_round):
                    samples = decoded[index][round_index * per_round + n]
                    with conn.transaction(), conn.cursor() as cur:
                        cur.execute("SET LOCAL synchronous_commit = off")
                        with cur.copy(COPY_SQL) as copy:
                            copy.set_types(PG_TYPES)
                            for ts, *metrics in samples:
                                copy.write_row(
                                    (
                                        vm_id,
                                        datetime.fromtimestamp(ts, tz=UTC),
                                        *metrics,
                                        cluster.pk,
                                    )
                                )
                    counts[index] += 1

            counts = [0] * clients
            return in_threads(copier, counts)

        try:
            (http_rate, http_cpu, http_split), (copy_rate, copy_cpu, copy_split) = self.interleaved(
                ingest_round, copy_round
            )
        finally:
            for conn in connections:
                conn.close()
        self.say(
            f"  ingest endpoint : {http_rate * BACKLOG:,.0f} samples/s, "
            f"{http_cpu * BACKLOG:,.0f} per CPU-second ({self.split(http_split)} per batch)"
        )
        self.say(
            f"  raw psycopg COPY: {copy_rate * BACKLOG:,.0f} samples/s, "
            f"{copy_cpu * BACKLOG:,.0f} per CPU-second ({self.split(copy_split)} per batch)"
        )
        return http_rate / copy_rate, http_cpu / copy_cpu

    # -----------------------------------------------------------------------------------------
    # Charts

    def bench_charts(self, cluster):
        """The 메트릭 tab per range and its device panel over the floor (``metrics_tab``)."""
        user = get_user_model().objects.create_superuser("bench", password="bench-only-1234")
        return metrics_tab.bench(cluster, user, cluster.project, self.say)
