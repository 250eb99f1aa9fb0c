"""``manage.py bench_pages``: server time and query counts of the console's heavy pages
(issue 6 item 7), each divided by a floor measured in the same run.

On PostgreSQL only. It works in a scratch database of its own (``bench_vcportal`` by default,
created with Django's test-database machinery, migrated, filled, and dropped at the end unless
``--keep``), so it never touches the portal's data. Pages go through Django's WSGI handler in
this process — the full middleware stack, no HTTP and no test-client instrumentation:

- the floor: a ``login_required`` view answering "ok", through the same middleware;
- the cluster list (50 per page) of a project with 10, with 50 and with 10,000 clusters;
- a running cluster's detail page (정보 tab, 8 running members, torchrun lines);
- the Connected VMs tab (연결된 가상머신) of a cluster with 256 members, all shown.

Each page is measured in interleaved rounds (so background load hits all alike), first with
Python's garbage collector as it is, then after ``gc.freeze()`` (what a server does after
start-up): the median and the p95 per page, the SQL time within, the full (gen 2) collections
that landed in the measured requests, and the query count. The targets of issue 6 are checked
at the end. ``--profile NAME`` prints a cProfile of one page instead.
"""

import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from collections import Counter
from contextlib import contextmanager

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import include, path

from clusters.models import ClusterStatus, SimulatorAllocation, VirtualCluster
from portal.management.scratch import bench_catalog, scratch_database
from portal.models import AuditEvent, Project, Role, RoleBinding
from portal.projects import SESSION_KEY
from vms.models import (
    BillingType,
    FabricType,
    VirtualMachine,
    VmStatus,
)

# Targets of issue 6 item 7: page median (and p95) over the floor's median.
TARGETS = {"list": 10.0, "detail": 6.0, "members": 12.0, "list_scaling": 1.3}


@login_required
def floor_view(request):
    """The minimal authenticated view: the same middleware, nothing else."""
    return HttpResponse(b"ok", content_type="text/plain")


# The bench's URLconf: the portal's, plus the floor.
urlpatterns = [path("__bench__/floor/", floor_view), path("", include("portal.urls"))]


class Command(BaseCommand):
    help = "Benchmark the console's cluster pages against a floor view (issue 6 item 7)."

    def add_arguments(self, parser):
        parser.add_argument("--rounds", type=int, default=150, help="measured rounds per page")
        parser.add_argument("--warmup", type=int, default=15)
        parser.add_argument("--database", default="bench_vcportal", help="scratch database")
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--profile", metavar="PAGE", help="cProfile one page instead")

    def handle(self, *args, **opts):
        if connection.vendor != "postgresql":
            raise CommandError("bench_pages measures PostgreSQL: set DATABASE_URL=postgres://...")
        if settings.DEBUG:
            raise CommandError("run with DEBUG=0: DEBUG keeps every query in memory")
        self.opts = opts
        started = time.perf_counter()
        with (
            scratch_database(opts["database"], keep=opts["keep"], say=self.say),
            override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["127.0.0.1"]),
        ):
            self.run_bench()
        self.say(f"total {time.perf_counter() - started:.0f} s")

    def say(self, text=""):
        self.stdout.write(text)
        self.stdout.flush()

    # -----------------------------------------------------------------------------------------
    # Data

    def make_world(self):
        started = time.perf_counter()
        zone, h100, capacities = bench_catalog()
        capacity = capacities[FabricType.INFINIBAND]
        user = get_user_model().objects.create_user("bench", password="bench-pass-1234")
        admin = Role.objects.get(name="admin")
        projects = {}
        for slug in ("small", "fifty", "large", "detail"):
            projects[slug] = Project.objects.create(slug=slug, name=slug)
            RoleBinding.objects.create(user=user, project=projects[slug], role=admin)

        statuses = [ClusterStatus.RUNNING, ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED]
        for slug, count in (("small", 10), ("fifty", 50), ("large", 10_000)):
            clusters = VirtualCluster.objects.bulk_create(
                VirtualCluster(
                    project=projects[slug],
                    name=f"{slug}-cluster-{i:05d}",
                    zone=zone,
                    instance_type=h100,
                    fabric_type=FabricType.INFINIBAND,
                    status=statuses[i % 3],
                    created_by=user,
                )
                for i in range(count)
            )
            # Two members each, so the member counts are real work for the database.
            VirtualMachine.objects.bulk_create(
                VirtualMachine(
                    project=projects[slug],
                    name=f"{c.name}-m{j}",
                    zone=zone,
                    instance_type=h100,
                    billing_type=BillingType.ON_DEMAND,
                    cluster=c,
                    private_ip=f"10.0.{j}.{k % 250}",
                    status=VmStatus.STOPPED,
                )
                for k, c in enumerate(clusters)
                for j in range(2)
            )

        detail = self.running_cluster(projects["detail"], zone, h100, user, capacity, "detail", 8)
        wide = self.running_cluster(projects["detail"], zone, h100, user, capacity, "wide", 256)
        AuditEvent.objects.bulk_create(
            AuditEvent(
                project=projects["detail"],
                actor=user,
                action="vm.start",
                target_type="vm",
                target_id=i,
                target_name=f"node-{i}",
                cluster_id=detail.pk,
                outcome=AuditEvent.Outcome.SUCCEEDED,
            )
            for i in range(200)
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        self.say(
            f"data: {VirtualCluster.objects.count():,} clusters, "
            f"{VirtualMachine.objects.count():,} VMs ({time.perf_counter() - started:.1f} s)"
        )
        return user, projects, detail, wide

    def running_cluster(self, project, zone, itype, user, capacity, name, members):
        cluster = VirtualCluster.objects.create(
            project=project,
            name=name,
            zone=zone,
            instance_type=itype,
            fabric_type=FabricType.INFINIBAND,
            status=ClusterStatus.RUNNING,
            created_by=user,
        )
        VirtualMachine.objects.bulk_create(
            VirtualMachine(
                project=project,
                name=f"{name}-node-{i:03d}",
                zone=zone,
                instance_type=itype,
                billing_type=BillingType.RESERVED,
                cluster=cluster,
                status=VmStatus.RUNNING,
                private_ip=f"10.1.{i // 250}.{i % 250 + 2}",
                fabric_guid=f"0x248a0703{i:08x}",
                fabric_lid=i + 1,
            )
            for i in range(members)
        )
        SimulatorAllocation.objects.create(
            cluster=cluster, capacity=capacity, nodes=members, configured=True
        )
        return cluster

    # -----------------------------------------------------------------------------------------
    # Requests

    def session_cookie(self, user, project):
        client = Client()
        client.force_login(user)
        session = client.session
        session[SESSION_KEY] = project.pk
        session.save()
        return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"

    def environ(self, path, cookie):
        return {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SCRIPT_NAME": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_COOKIE": cookie,
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }

    def request(self, handler, page):
        """One request through the WSGI handler: (status, body bytes)."""
        status = []
        result = handler(
            self.environ(page["path"], page["cookie"]),
            lambda s, headers, exc_info=None: status.append(s),
        )
        try:
            body = b"".join(result)
        finally:
            result.close()
        return status[0], body

    def pages(self, user, projects, detail, wide):
        def page(key, label, path, project, rows, kind):
            return {
                "key": key,
                "label": label,
                "path": path,
                "rows": rows,
                "kind": kind,
                "cookie": self.session_cookie(user, project),
            }

        return [
            page(
                "floor",
                "floor: login_required 'ok'",
                "/__bench__/floor/",
                projects["small"],
                "-",
                "floor",
            ),
            page(
                "list10", "cluster list, 10 clusters", "/clusters/", projects["small"], 10, "list"
            ),
            page(
                "list50", "cluster list, 50 clusters", "/clusters/", projects["fifty"], 50, "list"
            ),
            page(
                "list10k",
                "cluster list, 10,000 clusters",
                "/clusters/",
                projects["large"],
                50,
                "list",
            ),
            page(
                "detail",
                "cluster detail (8 running)",
                f"/clusters/{detail.pk}/",
                projects["detail"],
                8,
                "detail",
            ),
            page(
                "members",
                "Connected VMs, 256 members",
                f"/clusters/{wide.pk}/vms/",
                projects["detail"],
                256,
                "members",
            ),
        ]

    def count_queries(self, handler, page):
        with CaptureQueriesContext(connection) as queries:
            status, body = self.request(handler, page)
        if not status.startswith("200"):
            raise CommandError(f"{page['path']} answered {status}")
        if page["kind"] in ("list", "members") and page["rows"] != "-":
            shown = (
                body.count(b'<td class="num">')
                if page["kind"] == "list"
                else body.count(b"data-vm=")
            )
            if shown != page["rows"]:
                raise CommandError(f"{page['label']}: {shown} rows shown, {page['rows']} expected")
        return len(queries), len(body)

    @contextmanager
    def sql_timer(self, totals):
        def wrapper(execute, sql, params, many, context):
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                totals[0] += time.perf_counter() - started

        with connection.execute_wrapper(wrapper):
            yield

    def measure(self, handler, pages, rounds):
        """Interleaved rounds; per page: wall ms, SQL ms, and the gen-2 collections inside."""
        samples = {p["key"]: {"wall": [], "sql": [], "gc2": 0, "gc_ms": 0.0} for p in pages}
        gc_state = {"gen": None, "start": 0.0, "pause": 0.0, "full": 0}

        def on_gc(phase, info):
            if phase == "start":
                gc_state["start"] = time.perf_counter()
            else:
                gc_state["pause"] += time.perf_counter() - gc_state["start"]
                gc_state["full"] += info["generation"] == 2

        gc.callbacks.append(on_gc)
        try:
            for _round in range(rounds):
                for page in pages:
                    sql = [0.0]
                    full, pause = gc_state["full"], gc_state["pause"]
                    with self.sql_timer(sql):
                        started = time.perf_counter()
                        status, _body = self.request(handler, page)
                        elapsed = time.perf_counter() - started
                    assert status.startswith("200"), status
                    entry = samples[page["key"]]
                    entry["wall"].append(elapsed * 1000)
                    entry["sql"].append(sql[0] * 1000)
                    entry["gc2"] += gc_state["full"] - full
                    entry["gc_ms"] += (gc_state["pause"] - pause) * 1000
        finally:
            gc.callbacks.remove(on_gc)
        return samples

    # -----------------------------------------------------------------------------------------

    def run_bench(self):
        user, projects, detail, wide = self.make_world()
        # A live database has been vacuumed by autovacuum: visibility maps set, statistics
        # current. Bulk-loaded rows have neither until then, which would time a state no
        # deployment stays in (the list's COUNT read 10,000 heap pages instead of an index).
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        handler = WSGIHandler()
        pages = self.pages(user, projects, detail, wide)
        if self.opts["profile"]:
            return self.profile(handler, pages, self.opts["profile"])
        counts = {p["key"]: self.count_queries(handler, p) for p in pages}
        for _round in range(self.opts["warmup"]):
            for page in pages:
                self.request(handler, page)
        gc.collect()
        self.say(f"gc: {len(gc.get_objects()):,} tracked objects, thresholds {gc.get_threshold()}")
        as_is = self.measure(handler, pages, self.opts["rounds"])
        gc.collect()
        gc.freeze()
        frozen = self.measure(handler, pages, self.opts["rounds"])
        gc.unfreeze()
        self.report(pages, counts, as_is, frozen)

    @staticmethod
    def p95(values):
        return statistics.quantiles(values, n=20, method="inclusive")[-1]

    def report(self, pages, counts, as_is, frozen):
        floor = statistics.median(as_is["floor"]["wall"])
        floor_frozen = statistics.median(frozen["floor"]["wall"])
        self.say()
        self.say(
            f"{self.opts['rounds']} interleaved rounds per page; times in ms; "
            "x floor = page time / floor median of the same pass"
        )
        header = (
            f"{'page':32} {'rows':>5} {'queries':>7} {'KiB':>6} | {'median':>7} "
            f"{'p95':>7} {'SQL':>6} {'gen2':>4} {'x floor':>12} | "
            f"{'gc.freeze: median':>17} {'p95':>7} {'x floor':>12}"
        )
        self.say(header)
        self.say("-" * len(header))
        results = {}
        for page in pages:
            key = page["key"]
            a, f = as_is[key], frozen[key]
            row = {
                "median": statistics.median(a["wall"]),
                "p95": self.p95(a["wall"]),
                "sql": statistics.median(a["sql"]),
                "gc2": a["gc2"],
                "f_median": statistics.median(f["wall"]),
                "f_p95": self.p95(f["wall"]),
            }
            results[key] = row
            queries, size = counts[key]
            self.say(
                f"{page['label']:32} {page['rows']!s:>5} {queries:>7} {size / 1024:>6.1f} | "
                f"{row['median']:>7.2f} {row['p95']:>7.2f} {row['sql']:>6.2f} {row['gc2']:>4} "
                f"{row['median'] / floor:>5.1f}/{row['p95'] / floor:>5.1f}  | "
                f"{row['f_median']:>17.2f} {row['f_p95']:>7.2f} "
                f"{row['f_median'] / floor_frozen:>5.1f}/{row['f_p95'] / floor_frozen:>5.1f}"
            )
        self.say("(x floor: median/p95 over the floor's median)")
        self.say()
        self.check_targets(counts, results, floor, floor_frozen)

    def check_targets(self, counts, r, floor, floor_frozen):
        def verdict(ok):
            return "met" if ok else "MISSED"

        lines = [
            (
                "query counts equal at 10 and 10,000 clusters",
                f"{counts['list10'][0]} vs {counts['list10k'][0]}",
                counts["list10"][0] == counts["list10k"][0],
            ),
        ]
        for label, key, base, limit in (
            (
                "list at 10,000 <= 1.3x list at 10 (median)",
                "list10k",
                "list10",
                TARGETS["list_scaling"],
            ),
            (
                "list at 10,000 <= 1.3x list at 50 (median, same rows)",
                "list10k",
                "list50",
                TARGETS["list_scaling"],
            ),
        ):
            ratio = r[key]["median"] / r[base]["median"]
            lines.append((label, f"{ratio:.2f}x", ratio <= limit))
        for label, key, limit in (
            ("list (10) <= 10x floor", "list10", TARGETS["list"]),
            ("list (10,000) <= 10x floor", "list10k", TARGETS["list"]),
            ("detail <= 6x floor", "detail", TARGETS["detail"]),
            ("Connected VMs (256) <= 12x floor", "members", TARGETS["members"]),
        ):
            median, p95 = r[key]["median"] / floor, r[key]["p95"] / floor
            frozen = r[key]["f_p95"] / floor_frozen
            lines.append(
                (
                    label,
                    f"median {median:.1f}x, p95 {p95:.1f}x, p95 frozen {frozen:.1f}x",
                    median <= limit and p95 <= limit,
                )
            )
        self.say("targets (issue 6 item 7):")
        for label, figure, ok in lines:
            self.say(f"  {verdict(ok):6} {label:52} {figure}")

    def profile(self, handler, pages, key):
        page = next((p for p in pages if p["key"] == key), None)
        if page is None:
            raise CommandError(f"--profile takes one of {', '.join(p['key'] for p in pages)}")
        for _round in range(self.opts["warmup"]):
            self.request(handler, page)
        sql = [0.0]
        profiler = cProfile.Profile()
        with self.sql_timer(sql):
            started = time.perf_counter()
            profiler.enable()
            for _round in range(self.opts["rounds"]):
                self.request(handler, page)
            profiler.disable()
            elapsed = time.perf_counter() - started
        per = elapsed / self.opts["rounds"] * 1000
        self.say(
            f"{page['label']}: {per:.2f} ms/request under the profiler, "
            f"SQL {sql[0] / self.opts['rounds'] * 1000:.2f} ms"
        )
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative")
        stats.print_stats(35)
        self.say(out.getvalue())
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(20)
        self.say(out.getvalue())
        with CaptureQueriesContext(connection) as queries:
            self.request(handler, page)
        for query in queries:
            self.say(f"  {query['time']}s  {query['sql'][:220]}")
        calls = Counter(q["sql"].split(" FROM ")[-1][:60] for q in queries)
        self.say(str(calls.most_common(5)))
        return None
