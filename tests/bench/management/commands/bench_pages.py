"""``manage.py bench_pages``: server time and query counts of the console's heavy pages,
each divided by a floor measured in the same run.

On PostgreSQL only. It works in a scratch database of its own (``tests.bench.scratch``: a
fresh ``vc_scratch_…`` name, migrated, filled, dropped at the end unless ``--keep``), so it
never touches the portal's data. Pages go through Django's WSGI handler in this process — the
full middleware stack, no HTTP and no test-client instrumentation (``tests.bench.inprocess``):

- the floor: a ``login_required`` view answering "ok", through the same middleware;
- the cluster list (50 per page) of a project with 10, with 50 and with 10,000 clusters, and
  the last page (``?page=200``) of the 10,000;
- a running cluster's detail page (정보 tab, 8 running members, torchrun lines);
- the Connected VMs tab (연결된 가상머신) of a cluster with 256 members, all shown; and the
  same with none of its rows kept (``forget_rows`` before each request, not timed).

Each page's first request is timed in a fresh process of its own (cold: URLconf, views,
templates and the database connection still to load). Then every page is measured in rounds,
in an order shuffled every round from ``--seed`` (a fixed order would always time one page
right after the same other one: the floor after the heaviest page ran 12–19% slower, which
flattered every ratio), first with Python's garbage collector as it is, then after
``gc.freeze()`` (what a server may do after start-up; the portal's does not: it bought
nothing here): the median and the p95 per page, the SQL time within, the full (gen 2)
collections that landed in the measured requests, and the query count. The targets are
checked at the end: the floor's queries (the session and the user, whose row brings their
roles), the pages' ratios and their query counts equal at 10 and 10,000 clusters.
``--profile NAME`` prints a cProfile of one page instead.
"""

import cProfile
import gc
import io
import pstats
import random
import statistics
import time
from collections import Counter, defaultdict

from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from clusters import tally
from clusters.models import VirtualCluster
from clusters.templatetags.member_table import forget_rows
from tests.bench.command import BenchCommand
from tests.bench.inprocess import BENCH_SETTINGS, cold_request, request, session_cookie, sql_timer
from tests.bench.worlds import pages_world
from vms.models import VirtualMachine

# Page median (and p95) over the floor's median; the floor's own query count.
TARGETS = {"list": 2.5, "detail": 2.5, "members": 4.0, "list_scaling": 1.3, "floor_queries": 2}


class Command(BenchCommand):
    help = "Benchmark the console's cluster pages against a floor view."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--rounds", type=int, default=150, help="measured rounds per page")
        parser.add_argument("--warmup", type=int, default=15)
        parser.add_argument("--seed", type=int, default=1, help="seeds the order of each round")
        parser.add_argument("--profile", metavar="PAGE", help="cProfile one page instead")

    def refusal(self, opts):
        return "--rounds must be at least 2 (a p95 needs two samples)" if opts["rounds"] < 2 else ""

    def around(self):
        return override_settings(**BENCH_SETTINGS)

    def pages(self, user, projects, detail, wide):
        """The pages, floor first; ``expect`` is text only the right page shows."""

        def page(key, label, path, project, rows, kind, query="", expect=b""):
            return {
                "key": key,
                "label": label,
                "path": path,
                "query": query,
                "rows": rows,
                "kind": kind,
                "expect": expect,
                "cookie": session_cookie(user, project),
            }

        small, fifty, large = projects["small"], projects["fifty"], projects["large"]
        return [
            page("floor", "floor: login_required 'ok'", "/__bench__/floor/", small, "-", "floor"),
            page("list10", "cluster list, 10 clusters", "/clusters/", small, 10, "list"),
            page("list50", "cluster list, 50 clusters", "/clusters/", fifty, 50, "list"),
            page(
                "list10k", "cluster list, 10,000 clusters", "/clusters/", large, 50, "list",
                expect=b"large-cluster-09999",
            ),
            page(
                "deep", "10,000 clusters, ?page=200", "/clusters/", large, 50, "list",
                query="page=200", expect=b"large-cluster-00000",
            ),
            page(
                "detail", "cluster detail (8 running)", f"/clusters/{detail.pk}/",
                projects["detail"], 8, "detail",
            ),
            page(
                "members", "Connected VMs, 256 members", f"/clusters/{wide.pk}/vms/",
                projects["detail"], 256, "members",
            ),
            # The same tab with none of its rows kept: a first look, or every member changed.
            {
                **page(
                    "members_drawn", "  the same, rows drawn anew", f"/clusters/{wide.pk}/vms/",
                    projects["detail"], 256, "members",
                ),
                "before": forget_rows,
            },
        ]  # fmt: skip

    def count_queries(self, handler, page):
        """(queries, bytes) of one request, after checking the page shows what it should.
        Counted on the second request: the first in a process also reads what the process
        then keeps (the catalog's zones), which the cold column times."""
        request(handler, page)
        with CaptureQueriesContext(connection) as queries:
            status, body = request(handler, page)
        if not status.startswith("200"):
            raise CommandError(f"{page['label']} answered {status}")
        if page["kind"] in ("list", "members"):
            shown = body.count(
                b'<td class="num" data-label=' if page["kind"] == "list" else b"data-vm="
            )
            if shown != page["rows"]:
                raise CommandError(f"{page['label']}: {shown} rows shown, {page['rows']} expected")
        if page["expect"] not in body:
            raise CommandError(f"{page['label']}: {page['expect'].decode()} is not on the page")
        return len(queries), len(body)

    def cold(self, pages):
        """{key: ms of the page's first request in a fresh process} (tests.bench.cold)."""
        figures = {}
        for page in pages:
            answer = cold_request(page)
            if not answer["status"].startswith("200"):
                raise CommandError(f"{page['label']} answered {answer['status']} when cold")
            figures[page["key"]] = answer["cold"]
        return figures

    def measure(self, handler, pages, rounds, rng):
        """Rounds in a shuffled order; per page: wall ms, SQL ms, the gen-2 collections inside,
        and the floor's times by the page measured just before it."""
        samples = {p["key"]: {"wall": [], "sql": [], "gc2": 0, "gc_ms": 0.0} for p in pages}
        floor_after = defaultdict(list)
        gc_state = {"start": 0.0, "pause": 0.0, "full": 0}

        def on_gc(phase, info):
            if phase == "start":
                gc_state["start"] = time.perf_counter()
            else:
                gc_state["pause"] += time.perf_counter() - gc_state["start"]
                gc_state["full"] += info["generation"] == 2

        order, previous = list(pages), None
        gc.callbacks.append(on_gc)
        try:
            for _round in range(rounds):
                rng.shuffle(order)
                for page in order:
                    if "before" in page:
                        page["before"]()
                    sql = [0.0]
                    full, pause = gc_state["full"], gc_state["pause"]
                    with sql_timer(sql):
                        started = time.perf_counter()
                        status, _body = request(handler, page)
                        elapsed = time.perf_counter() - started
                    if not status.startswith("200"):
                        raise CommandError(f"{page['label']} answered {status}")
                    entry = samples[page["key"]]
                    entry["wall"].append(elapsed * 1000)
                    entry["sql"].append(sql[0] * 1000)
                    entry["gc2"] += gc_state["full"] - full
                    entry["gc_ms"] += (gc_state["pause"] - pause) * 1000
                    if page["key"] == "floor" and previous is not None:
                        floor_after[previous].append(elapsed * 1000)
                    previous = page["key"]
        finally:
            gc.callbacks.remove(on_gc)
        return samples, floor_after

    def run_bench(self):
        started = time.perf_counter()
        user, projects, detail, wide = pages_world()
        # A live database's cluster tally has been merged by beat (the bulk load left a
        # delta per cluster), and it has been vacuumed by autovacuum: visibility maps set,
        # statistics current. Bulk-loaded rows have neither until then, which would time a
        # state no deployment stays in (a COUNT read 10,000 heap pages instead of an index).
        tally.merge()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        self.say(
            f"data: {VirtualCluster.objects.count():,} clusters, "
            f"{VirtualMachine.objects.count():,} VMs ({time.perf_counter() - started:.1f} s)"
        )
        handler = WSGIHandler()
        pages = self.pages(user, projects, detail, wide)
        if self.opts["profile"]:
            return self.profile(handler, pages, self.opts["profile"])
        cold = self.cold(pages)
        counts = {p["key"]: self.count_queries(handler, p) for p in pages}
        for _round in range(self.opts["warmup"]):
            for page in pages:
                request(handler, page)
        gc.collect()
        self.say(f"gc: {len(gc.get_objects()):,} tracked objects, thresholds {gc.get_threshold()}")
        rng = random.Random(self.opts["seed"])
        as_is, floor_after = self.measure(handler, pages, self.opts["rounds"], rng)
        gc.collect()
        gc.freeze()
        frozen, _floor_after = self.measure(handler, pages, self.opts["rounds"], rng)
        gc.unfreeze()
        self.report(pages, counts, cold, as_is, frozen, floor_after)
        return None

    @staticmethod
    def p95(values):
        return statistics.quantiles(values, n=20, method="inclusive")[-1]

    def report(self, pages, counts, cold, as_is, frozen, floor_after):
        floor = statistics.median(as_is["floor"]["wall"])
        floor_frozen = statistics.median(frozen["floor"]["wall"])
        self.say()
        self.say(
            f"{self.opts['rounds']} rounds per pass, page order shuffled every round "
            f"(--seed {self.opts['seed']}); times in ms; x floor = page time / floor median "
            "of the same pass; cold = first request in a fresh process"
        )
        header = (
            f"{'page':30} {'rows':>4} {'queries':>7} {'KiB':>6} | {'cold':>7} {'median':>7} "
            f"{'p95':>7} {'SQL':>6} {'gen2':>4} {'x floor':>11} | "
            f"{'gc.freeze: median':>17} {'p95':>7} {'x floor':>11}"
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
                "f_median": statistics.median(f["wall"]),
                "f_p95": self.p95(f["wall"]),
            }
            results[key] = row
            queries, size = counts[key]
            self.say(
                f"{page['label']:30} {page['rows']!s:>4} {queries:>7} {size / 1024:>6.1f} | "
                f"{cold[key]:>7.1f} {row['median']:>7.2f} {row['p95']:>7.2f} "
                f"{statistics.median(a['sql']):>6.2f} {a['gc2']:>4} "
                f"{row['median'] / floor:>5.1f}/{row['p95'] / floor:<5.1f} | "
                f"{row['f_median']:>17.2f} {row['f_p95']:>7.2f} "
                f"{row['f_median'] / floor_frozen:>5.1f}/{row['f_p95'] / floor_frozen:<5.1f}"
            )
        self.say("(x floor: median/p95 over the floor's median)")
        self.say(
            "floor median by the page timed before it: "
            + ", ".join(
                f"{key} {statistics.median(floor_after[key]):.3f}"
                for key in (p["key"] for p in pages)
                if floor_after.get(key)
            )
        )
        self.say()
        self.check_targets(counts, results, floor, floor_frozen)

    def check_targets(self, counts, r, floor, floor_frozen):
        lines = [
            (
                f"floor: {TARGETS['floor_queries']} queries (session, user with roles)",
                str(counts["floor"][0]),
                counts["floor"][0] <= TARGETS["floor_queries"],
            ),
            (
                "query counts equal at 10 and 10,000 clusters",
                f"{counts['list10'][0]} vs {counts['list10k'][0]}",
                counts["list10"][0] == counts["list10k"][0],
            ),
        ]
        for label, key, base in (
            ("list at 10,000 <= 1.3x list at 10 (median)", "list10k", "list10"),
            ("list at 10,000 <= 1.3x list at 50 (median, same rows)", "list10k", "list50"),
            ("page 200 of 10,000 <= 1.3x page 1 (median)", "deep", "list10k"),
        ):
            ratio = r[key]["median"] / r[base]["median"]
            lines.append((label, f"{ratio:.2f}x", ratio <= TARGETS["list_scaling"]))
        for label, key, limit in (
            ("list (10)", "list10", TARGETS["list"]),
            ("list (10,000)", "list10k", TARGETS["list"]),
            ("list (10,000, page 200)", "deep", TARGETS["list"]),
            ("detail", "detail", TARGETS["detail"]),
            ("Connected VMs (256)", "members", TARGETS["members"]),
        ):
            label = f"{label} <= {limit:g}x floor"
            median, p95 = r[key]["median"] / floor, r[key]["p95"] / floor
            frozen = r[key]["f_p95"] / floor_frozen
            lines.append(
                (
                    label,
                    f"median {median:.1f}x, p95 {p95:.1f}x, p95 frozen {frozen:.1f}x",
                    median <= limit and p95 <= limit,
                )
            )
        self.say("targets:")
        for label, figure, ok in lines:
            self.say(f"  {'met' if ok else 'MISSED':6} {label:54} {figure}")

    def profile(self, handler, pages, key):
        page = next((p for p in pages if p["key"] == key), None)
        if page is None:
            raise CommandError(f"--profile takes one of {', '.join(p['key'] for p in pages)}")
        for _round in range(self.opts["warmup"]):
            request(handler, page)
        sql = [0.0]
        profiler = cProfile.Profile()
        with sql_timer(sql):
            started = time.perf_counter()
            profiler.enable()
            for _round in range(self.opts["rounds"]):
                request(handler, page)
            profiler.disable()
            elapsed = time.perf_counter() - started
        per = elapsed / self.opts["rounds"] * 1000
        self.say(
            f"{page['label']}: {per:.2f} ms/request under the profiler, "
            f"SQL {sql[0] / self.opts['rounds'] * 1000:.2f} ms"
        )
        for order, count in (("cumulative", 35), ("tottime", 20)):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order).print_stats(count)
            self.say(out.getvalue())
        with CaptureQueriesContext(connection) as queries:
            request(handler, page)
        for query in queries:
            self.say(f"  {query['time']}s  {query['sql'][:220]}")
        calls = Counter(q["sql"].split(" FROM ")[-1][:60] for q in queries)
        self.say(str(calls.most_common(5)))
        return None
