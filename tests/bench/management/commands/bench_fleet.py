"""``manage.py bench_fleet``: many clusters started at once over a fleet of GPU hosts.

``--hosts`` GPU hosts on libvirt's test driver (8 H100s and 8 ConnectX VFs each over 2 NUMA
nodes; 16 hosts a leaf, 4 leaves a block), ``--clusters`` InfiniBand clusters of
``--members`` members of a ``--gpus``-GPU type. For each count of ``--workers`` (real Celery
worker processes on the Redis of ``CELERY_BROKER_URL``, started for the round and stopped
after it), every cluster is started at once through the Operation door, as users would:
``start_cluster_op`` for each, then ``start_members`` for each as soon as it is 실행중.
Printed per round: from 클러스터 시작 to its last member 실행중 (portal-side, the rows'
``status_changed_at``; the test driver boots nothing) p50/p95/max, member starts per second,
the time backends spent waiting on locks (``pg_stat_activity`` sampled every 20 ms, by the
waiting statement), and the CPU the workers, PostgreSQL and this process spent. Then, at the
full fleet: one cluster's placement (``allocate``), the database round trips of one member
start (a cluster started eagerly in this process, its queries and commits counted), and one
reconciler pass (``clusters.progress.reconcile``) over every host.

Between rounds the clusters are put back by SQL (미할당, members 중지됨, no placements or
partitions), which only a scratch database allows; each round's workers are new processes,
so libvirt's test driver (whose state lives in the process that opened the host) starts
empty. For the reconciler pass this process defines and starts the last round's domains
itself (the workers' test-driver domains died with them), untimed.

Not part of CI (a smoke test runs it at tiny sizes: ``tests/bench/test_bench_fleet.py``).
``DEBUG=0 DJANGO_SETTINGS_MODULE=tests.bench.settings DATABASE_URL=postgres://…
CELERY_BROKER_URL=redis://…/N python manage.py bench_fleet [--hosts 1000 --clusters 100
--members 16 --workers 1,2,4]``
"""

import logging
import os
import socket
import statistics
import threading
import time
from collections import Counter
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psycopg
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Max
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from clusters import operations
from clusters.models import ClusterStatus, VirtualCluster
from clusters.progress import reconcile
from portal.catalog.models import FabricType
from portal.celery import app
from portal.compute.models.hosts import FabricPartition, GpuHost, HostDevice, Placement
from portal.models import Project, Role, RoleBinding
from tests.bench.command import BenchCommand
from tests.bench.processes import celery_worker_command, children_in_tempdir, cpu_seconds, spent
from tests.bench.scratch import database_url
from tests.bench.worlds import clusters_with_members, libvirt_catalog
from vms.models import VirtualMachine, VmStatus

LIBVIRT = "portal.compute.backends.libvirt.LibvirtBackend"
HOSTS_PER_LEAF, LEAVES_PER_BLOCK = 16, 4
SAMPLE_EVERY = 0.02
# Goals (issue #42): scaling of starts per second from 1 worker, placement of one cluster,
# one reconciler pass.
TARGETS = {"scale2": 1.7, "scale4": 3.0, "placement_s": 1.0, "reconcile_s": 10.0}


def workers_list(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise CommandError("--workers: worker counts separated by commas, each at least 1")
    return counts


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def schedstat(pids: list[int]) -> tuple[float, float]:
    """Seconds ``pids`` have spent on a CPU and runnable waiting for one (the kernel's
    ``/proc/<pid>/schedstat``), summed; (0, 0) where the kernel does not say."""
    on_cpu = waiting = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        except OSError:
            continue
        on_cpu, waiting = on_cpu + int(fields[0]), waiting + int(fields[1])
    return on_cpu / 1e9, waiting / 1e9


def cpu_pressure() -> str:
    """The kernel's CPU pressure: the share of the last minute in which some runnable task
    waited for a CPU (``/proc/pressure/cpu``), or '?'."""
    try:
        some = Path("/proc/pressure/cpu").read_text().split("\n")[0]
    except OSError:
        return "?"
    return next((f[6:] + " %" for f in some.split() if f.startswith("avg60=")), "?")


class LockSampler:
    """Backends of the bench database waiting on a lock, sampled every ``SAMPLE_EVERY`` on a
    connection of its own: waiting seconds in all (samples × interval) and by statement."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.waited = 0.0
        self.by_statement: Counter = Counter()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        sql = (
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            last = time.perf_counter()
            while not self._stop.wait(SAMPLE_EVERY):
                rows = conn.execute(sql).fetchall()
                now = time.perf_counter()
                interval, last = now - last, now
                self.peak = max(self.peak, len(rows))
                for (statement,) in rows:
                    self.waited += interval
                    self.by_statement[statement] += interval


class Command(BenchCommand):
    help = "Start many clusters at once over many test-driver GPU hosts; print the figures."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--hosts", type=int, default=1000)
        parser.add_argument("--clusters", type=int, default=100)
        parser.add_argument("--members", type=int, default=16)
        parser.add_argument("--gpus", type=int, default=2, help="GPUs per member (1, 2, 4, 8)")
        parser.add_argument(
            "--workers", default="1,2,4", help="Celery worker processes per round, e.g. 1,2,4"
        )
        parser.add_argument("--timeout", type=float, default=900, help="seconds per round")

    def refusal(self, opts):
        workers_list(opts["workers"])
        if opts["gpus"] not in (1, 2, 4, 8):
            return "--gpus must be 1, 2, 4 or 8 (a host has 8)"
        if opts["hosts"] < 1 or opts["clusters"] < 1 or opts["members"] < 2:
            return "--hosts and --clusters must be at least 1, --members at least 2"
        slots = opts["hosts"] * (8 // opts["gpus"])
        if opts["clusters"] * opts["members"] + opts["members"] > slots:
            return (
                f"{opts['clusters']} x {opts['members']} members (and one more cluster) "
                f"need more than the {slots} slots of {opts['hosts']} hosts"
            )
        if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
            return "bench_fleet runs real workers: set CELERY_BROKER_URL=redis://…"
        return ""

    @contextmanager
    def around(self):
        saved = app.conf.task_always_eager
        for name in ("portal.foundation.audit", "celery.app.trace"):  # a line per action
            logging.getLogger(name).setLevel(logging.WARNING)
        app.conf.task_always_eager = False
        try:
            with (
                children_in_tempdir("bench-fleet-") as children,
                override_settings(COMPUTE_BACKEND=LIBVIRT),
            ):
                self.children, self.workdir = children, children.workdir
                yield
        finally:
            app.conf.task_always_eager = saved
            app.control.purge()

    # -----------------------------------------------------------------------------------------

    def run_bench(self):
        o = self.opts
        self.say(
            f"{o['hosts']} hosts x 8 GPUs, {o['clusters']} clusters x {o['members']} members "
            f"of {o['gpus']} GPUs, workers {o['workers']}; {os.cpu_count()} CPUs, load average "
            f"{self.load()}"
        )
        self.admin, self.project, zone, itype = self.world()
        spare = clusters_with_members(
            self.project, zone, itype, 1, lambda _i: o["members"], name="probe",
            status=lambda _i: ClusterStatus.UNALLOCATED, created_by=self.admin,
            member=lambda _i, j: {"node_rank": j},
        )[0]  # fmt: skip
        placement = self.bench_placement(spare)
        trips = self.bench_round_trips(spare)
        self.reset([spare.pk])
        clusters = clusters_with_members(
            self.project, zone, itype, o["clusters"], lambda _i: o["members"], name="fleet",
            status=lambda _i: ClusterStatus.UNALLOCATED, created_by=self.admin,
            member=lambda _i, j: {"node_rank": j},
        )  # fmt: skip
        ids = [c.pk for c in clusters]
        rounds: dict = {}
        for workers in workers_list(o["workers"]):
            self.reset(ids)
            rounds[workers] = self.bench_round(ids, workers)
            self.report_round(workers, rounds)
        reconciled = self.bench_reconcile()
        self.report(placement, trips, rounds, reconciled)

    def world(self):
        zone, itype = libvirt_catalog(self.opts["gpus"], 24 * self.opts["gpus"], 256)
        from portal.compute.backends.libvirt.inventory import sync_host
        from tests.libvirt_testhost import write_hosts

        started = time.perf_counter()
        uris = write_hosts(self.workdir / "hosts", self.opts["hosts"])
        per_block = HOSTS_PER_LEAF * LEAVES_PER_BLOCK
        hosts = GpuHost.objects.bulk_create(
            GpuHost(
                name=f"gpu-host-{i:04d}", zone=zone, uri=uri, fabric=FabricType.INFINIBAND,
                block=f"b{i // per_block}", leaf=f"l{i // HOSTS_PER_LEAF}",
            )
            for i, uri in enumerate(uris)
        )  # fmt: skip
        for host in hosts:
            sync_host(host)
        self.say(f"{len(hosts)} hosts made and synced in {time.perf_counter() - started:.1f} s")
        project = Project.objects.create(slug="fleet", name="fleet")
        admin = get_user_model().objects.create_user("fleet-admin", password="bench-pass-1")
        role = Role.objects.get(name="admin")
        RoleBinding.objects.create(user=admin, project=project, role=role)
        return admin, project, zone, itype

    @staticmethod
    def load() -> str:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())

    def reset(self, cluster_ids=()):
        """Every cluster of ``cluster_ids`` 미할당 with its members 중지됨, and no device held
        (SQL on the scratch database: the state a fresh fleet starts from)."""
        HostDevice.objects.update(placement=None)
        Placement.objects.all().delete()
        FabricPartition.objects.all().delete()
        VirtualMachine.objects.filter(cluster_id__in=cluster_ids).update(
            status=VmStatus.STOPPED, fabric_guid="", fabric_lid=None, fabric_ip=None,
            fabric_gid_index=None, private_ip=None,
        )  # fmt: skip
        VirtualCluster.objects.filter(pk__in=cluster_ids).update(
            status=ClusterStatus.UNALLOCATED, operation="", previous_status=""
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    # -----------------------------------------------------------------------------------------

    def bench_placement(self, cluster):
        """``allocate`` of one ``--members`` cluster over the whole fleet, 5 times (each
        undone), in this process: the database work of placement under its locks."""
        from portal.compute.backends.libvirt import LibvirtBackend

        backend, seconds = LibvirtBackend(), []
        for _ in range(5):
            started = time.perf_counter()
            backend.allocate(cluster, self.opts["members"])
            seconds.append(time.perf_counter() - started)
            held = Placement.objects.filter(cluster=cluster).count()
            if held != self.opts["members"]:
                raise CommandError(f"placement held {held} of {self.opts['members']} members")
            self.reset()
        return statistics.median(seconds)

    def bench_round_trips(self, cluster):
        """클러스터 시작 and 멤버 모두 시작 of one cluster, every task run eagerly in this
        process: its queries and transactions (each a BEGIN and a COMMIT) over its members."""
        ended = Counter()

        def counted(method):
            def end():
                ended[method.__name__] += 1
                return method()

            return end

        app.conf.task_always_eager = True
        connection.commit, connection.rollback = (
            counted(connection.commit),
            counted(connection.rollback),
        )
        try:
            with CaptureQueriesContext(connection) as captured:
                operations.start_cluster_op(cluster.pk, actor=self.admin)
                cluster.refresh_from_db()
                if cluster.status != ClusterStatus.RUNNING:
                    raise CommandError(f"the probe cluster is {cluster.status}, not running")
                operations.start_members(cluster.pk, actor=self.admin)
        finally:
            app.conf.task_always_eager = False
            del connection.commit, connection.rollback  # the class's methods again
        running = cluster.members.filter(status=VmStatus.RUNNING).count()
        if running != self.opts["members"]:
            raise CommandError(f"the probe cluster runs {running} of {self.opts['members']}")
        return len(captured) / running, sum(ended.values()) / running

    # -----------------------------------------------------------------------------------------

    def start_workers(self, count):
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "COMPUTE_BACKEND": LIBVIRT,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        }
        name = f"fleet{count}-{os.getpid()}"
        worker = self.children.spawn(celery_worker_command(name, count), "celery", env)
        deadline = time.monotonic() + 120
        while not app.control.ping(destination=[f"{name}@{socket.gethostname()}"], timeout=1):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise CommandError(f"the worker did not start:\n{self.children.log_tail('celery')}")

    def bench_round(self, ids, workers):
        app.control.purge()
        self.start_workers(workers)
        pids = self.children.pids()
        dsn = database_url()
        members = self.opts["members"]
        roles = {"workers": pids, "this process": [os.getpid()]}
        pool = pids[1:]  # the worker's pool processes, which run the tasks
        sched_before = schedstat(pool)
        before = {role: cpu_seconds(p) for role, p in roles.items()}
        before["PostgreSQL"] = cpu_seconds(self.backends())
        load_before = self.load()
        started_at: dict[int, datetime] = {}
        member_ops: set[int] = set()
        deadline = time.monotonic() + self.opts["timeout"]
        with LockSampler(dsn) as locks:
            t0 = timezone.now()
            for pk in ids:
                started_at[pk] = timezone.now()
                operations.start_cluster_op(pk, actor=self.admin)
            while True:
                rows = VirtualCluster.objects.filter(pk__in=ids).values_list("pk", "status")
                statuses = dict(rows)
                for pk, status in statuses.items():
                    if status == ClusterStatus.RUNNING and pk not in member_ops:
                        operations.start_members(pk, actor=self.admin)
                        member_ops.add(pk)
                unsettled = VirtualMachine.objects.filter(cluster_id__in=ids).exclude(
                    status=VmStatus.RUNNING
                )
                failed = [pk for pk, s in statuses.items() if s == ClusterStatus.UNALLOCATED]
                if failed:
                    raise CommandError(f"{len(failed)} clusters failed to start: {failed[:5]}")
                if len(member_ops) == len(ids) and not unsettled.exists():
                    break
                if time.monotonic() > deadline:
                    raise CommandError(
                        f"round of {workers} workers: {unsettled.count()} members not running "
                        f"after {self.opts['timeout']:.0f} s"
                    )
                time.sleep(0.1)
            after = {role: cpu_seconds(p) for role, p in roles.items()}
            after["PostgreSQL"] = cpu_seconds(self.backends())
            sched = [b - a for a, b in zip(sched_before, schedstat(pool), strict=True)]
        self.children.stop()
        last = dict(
            VirtualMachine.objects.filter(cluster_id__in=ids)
            .values_list("cluster_id")
            .annotate(last=Max("status_changed_at"))
        )
        latency = [(last[pk] - started_at[pk]).total_seconds() for pk in ids]
        wall = (max(last.values()) - t0).total_seconds()
        return {
            "latency": latency,
            "wall": wall,
            "rate": len(ids) * members / wall,
            "locks": locks,
            "cpu": {role: spent(before[role], after[role]) for role in after},
            "load": (load_before, self.load()),
            "pool": (len(pool), *sched),
            "pressure": cpu_pressure(),
        }

    @staticmethod
    def backends() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            return [pid for (pid,) in cursor.fetchall()]

    # -----------------------------------------------------------------------------------------

    def bench_reconcile(self):
        """One reconciler pass over the fleet with the last round's domains defined and
        running in this process (defining them is not timed)."""
        from portal.compute.backends.libvirt import LibvirtBackend
        from portal.compute.backends.libvirt import connection as lv

        backend = LibvirtBackend()
        started = time.perf_counter()
        running = VirtualMachine.objects.filter(status=VmStatus.RUNNING).select_related(
            "cluster", "instance_type"
        )
        partitions = {p.cluster_id: p for p in FabricPartition.objects.all()}
        placed = {p.vm_id: p for p in Placement.objects.select_related("host", "domain_host")}
        for vm in running:
            place = placed[vm.pk]
            place.domain_host_id = None
            dom = backend._define(vm, place, partitions.get(vm.cluster_id), None, prepare=False)
            dom.create()
        defined = time.perf_counter() - started
        started = time.perf_counter()
        repaired = reconcile()
        seconds = time.perf_counter() - started
        for uri in GpuHost.objects.values_list("uri", flat=True):
            lv.forget(uri)
        still = VirtualMachine.objects.filter(status=VmStatus.RUNNING).count()
        return {"seconds": seconds, "defined": defined, "repaired": len(repaired), "running": still}

    # -----------------------------------------------------------------------------------------

    def report_round(self, workers, rounds):
        r, members = rounds[workers], self.opts["clusters"] * self.opts["members"]
        lat, cores = r["latency"], os.cpu_count() or 1
        cpu = sum(r["cpu"].values())
        self.say(
            f"{workers} worker(s): 클러스터 시작 → every member 실행중 "
            f"p50 {percentile(lat, 0.5):.2f} / p95 {percentile(lat, 0.95):.2f} "
            f"/ max {max(lat):.2f} s; {r['rate']:.2f} member starts/s ({r['wall']:.1f} s)"
        )
        locks = r["locks"]
        self.say(
            f"   waiting on locks {locks.waited:.1f} s in all, at most {locks.peak} backends at "
            f"once; load average {r['load'][0]} → {r['load'][1]}"
        )
        for statement, seconds in locks.by_statement.most_common(3):
            self.say(f"     {seconds:6.1f} s  {statement}")
        self.say(
            f"   CPU {cpu:.0f} s = {cpu / (r['wall'] * cores):.0%} of {cores} CPUs over the "
            f"round, {1000 * cpu / members:.0f} ms a member start ("
            + ", ".join(f"{role} {s:.0f} s" for role, s in r["cpu"].items())
            + ")"
        )
        processes, on_cpu, runnable = r["pool"]
        asleep = processes * r["wall"] - on_cpu - runnable
        self.say(
            f"   the worker's {processes} pool processes: on a CPU {on_cpu:.0f} s, runnable "
            f"waiting for a CPU {runnable:.0f} s, asleep (database, locks, broker) "
            f"{asleep:.0f} s of {processes * r['wall']:.0f} s; CPU pressure (a task waiting "
            f"for a CPU, last minute) {r['pressure']}"
        )
        first = next(iter(rounds))
        if workers != first:
            scale = r["rate"] / rounds[first]["rate"]
            goal = {2: TARGETS["scale2"], 4: TARGETS["scale4"]}.get(workers) if first == 1 else None
            marked = f" (goal >= {goal}: {met(scale >= goal)})" if goal else ""
            self.say(f"   starts/s over {first} worker's: {scale:.2f}x{marked}")

    def report(self, placement, trips, rounds, reconciled):
        o = self.opts
        self.say("")
        self.say(
            f"== bench_fleet: {o['hosts']} hosts, {o['clusters']} clusters x {o['members']} "
            f"members; load average now {self.load()} on {os.cpu_count()} CPUs =="
        )
        for workers in rounds:
            self.report_round(workers, rounds)
        self.say(
            f"placement of one {o['members']}-member cluster at {o['hosts']} hosts: "
            f"{placement:.3f} s (goal <= {TARGETS['placement_s']:g} s: "
            f"{met(placement <= TARGETS['placement_s'])})"
        )
        self.say(
            f"one reconciler pass over {o['hosts']} hosts: {reconciled['seconds']:.2f} s "
            f"(goal <= {TARGETS['reconcile_s']:g} s: "
            f"{met(reconciled['seconds'] <= TARGETS['reconcile_s'])}); "
            f"{reconciled['running']} VMs running, {reconciled['repaired']} repaired"
        )
        queries, commits = trips
        self.say(
            f"database round trips per member start: {queries + 2 * commits:.1f} "
            f"({queries:.1f} queries, a BEGIN and a COMMIT for each of {commits:.1f} "
            "transactions)"
        )
