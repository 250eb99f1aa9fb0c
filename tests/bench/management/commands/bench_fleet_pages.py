"""``manage.py bench_fleet_pages``: the console's and the API's reads at fleet size, each over
its floor measured in the same run, and the growth from 256 to 1,024 members.

On PostgreSQL, in a scratch database of its own (``tests.bench.scratch``), filled by
``tests.bench.worlds.fleet_pages_world``: a project of ``--project-clusters`` (1,000)
clusters among ``--total-clusters`` (100,000) in the database; running clusters of 256 and
1,024 members (``--wide``) with an hour of 10-second samples each (host, 8 GPUs and 4 ports
a member: ``tests.bench.samples``); a project of ``--api-vms`` (10,000) standalone VMs.

Timed through Django's WSGI handler in this process, rounds shuffled (``--seed``), as
``bench_pages`` and ``bench_api`` do:

- the session floor (``login_required`` "ok") and the token floor (``/__bench__/api-floor/``);
- the cluster list of the 1,000 (50 a page), its first and its last page;
- per wide cluster: 연결된 가상머신 (every member on one page), the 메트릭 tab at 1h and
  its per-device panel (slowest GPU and port, the node × GPU heatmap, 하위 5);
- ``GET /api/v1/virtual-machines?page_size=100`` of the 10,000, its first and last page.

Then, unless ``--no-browser``: the portal under gunicorn, Debian's Chromium opening the
1,024-member cluster's 메트릭 tab (``bench_first_chart``'s portal), timed from the click to
the heatmap of 1,024 × 8 cells drawn, with the main thread's longest task and the sum of its
long tasks' time over 50 ms (Long Tasks API) once plotly.js has run — how long drawing the
charts and the heatmap kept the page from answering a click (plotly.js's own compile on a
first visit is ``bench_first_chart``'s figure).

Targets: the list ≤ 2.5x the session floor and its last page ≤ 1.3x its first; the API's
page ≤ 3x the token floor and its last page ≤ 1.3x its first; each wide-cluster page at
1,024 members ≤ 2x its time at 256 (4x the members); in Chromium, no task over 1 s.
"""

import json
import os
import random
import statistics
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from clusters import tally
from portal.iam import tokens
from tests.bench import samples
from tests.bench.inprocess import BENCH_SETTINGS, request, session_cookie
from tests.bench.management.commands import bench_first_chart
from tests.bench.management.commands.bench_api import call, last_token
from tests.bench.worlds import fleet_pages_world

TARGETS = {"list": 2.5, "api": 3.0, "last_page": 1.3, "growth": 2.0, "longest_task_ms": 1000.0}
FLEET_SETTINGS = {
    **BENCH_SETTINGS,
    "ROOT_URLCONF": "tests.bench.api_urls",  # both floors and the portal
    "API_RATE_PER_MINUTE": 10**9,
}
# Installed before the page's scripts: long tasks as they end, when plotly.js has run (its
# compile is bench_first_chart's subject: the tasks counted here start after it), and when
# the heatmap has its SVG (plotly adds it while drawing).
WATCH_HEATMAP = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longTasks.push([entry.startTime, entry.duration]);
}).observe({type: "longtask", buffered: true});
window.__plotlyReady = null;
Object.defineProperty(window, "Plotly", {
  configurable: true,
  set(value) {
    Object.defineProperty(window, "Plotly", {value, writable: true, configurable: true});
    window.__plotlyReady = performance.now();
  },
});
window.__heatmap = null;
new MutationObserver((changes, observer) => {
  if (document.querySelector('[data-metrics-figure="metrics-fig-heatmap"] .main-svg')) {
    window.__heatmap = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""


class Command(bench_first_chart.Command):
    help = "Time the cluster list, a 1,024-member cluster's pages and the API at fleet size."

    def add_arguments(self, parser):
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--total-clusters", type=int, default=100_000)
        parser.add_argument("--project-clusters", type=int, default=1_000)
        parser.add_argument("--wide", default="256,1024", help="member counts, smaller first")
        parser.add_argument("--api-vms", type=int, default=10_000)
        parser.add_argument("--rounds", type=int, default=30)
        parser.add_argument("--warmup", type=int, default=3)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--samples", type=int, default=3, help="browser opens")
        parser.add_argument("--no-browser", action="store_true")

    def refusal(self, opts):
        try:
            wide = [int(size) for size in opts["wide"].split(",")]
        except ValueError:
            return "--wide takes member counts separated by commas: 256,1024"
        if len(wide) != 2 or not 2 <= wide[0] < wide[1]:
            return "--wide takes two member counts, the smaller first (at least 2)"
        if opts["rounds"] < 2 or opts["samples"] < 1:
            return "--rounds >= 2 (a p95 needs two samples) and --samples >= 1"
        if not 100 <= opts["project_clusters"] <= opts["total_clusters"]:
            return "--project-clusters between 100 and --total-clusters"
        if opts["api_vms"] < 200:
            return "--api-vms >= 200 (two pages at least)"
        opts["wide_sizes"] = wide
        if not opts["no_browser"]:
            return super().refusal({**opts, "vms": 2, "hours": 1})
        return ""

    def run_bench(self):
        started = time.perf_counter()
        small, large = self.opts["wide_sizes"]
        user = get_user_model().objects.create_user("bench", password="bench-pass-1234")
        projects, wide, _capacity = fleet_pages_world(
            user,
            self.opts["project_clusters"],
            self.opts["total_clusters"],
            (small, large),
            self.opts["api_vms"],
        )
        now = timezone.now()
        for size, cluster in wide.items():
            members = list(cluster.members.order_by("pk"))
            last = size == large
            samples.generate(cluster, members, now, timedelta(hours=1), self.say, rollup=last)
        tally.merge()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
            cursor.execute("SELECT count(*) FROM clusters_virtualcluster")
            clusters = cursor.fetchone()[0]
        self.say(f"data: {clusters:,} clusters ({time.perf_counter() - started:.0f} s)")
        secret = tokens.issue_token(user=user, project_id=projects["api"].pk, name="bench")[1]
        with override_settings(**FLEET_SETTINGS):
            handler = WSGIHandler()
            requests = self.requests(handler, user, projects, wide, secret)
            counts = {key: self.check_answer(handler, key, r) for key, r in requests.items()}
            times = self.measure_requests(handler, requests)
        self.report(requests, counts, times, small, large)
        if not self.opts["no_browser"]:
            self.browser(user, wide[large])
        self.say(f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    def requests(self, handler, user, projects, wide, secret):
        """{key: request}: a session page (path, query, cookie, rows) or an API call."""
        fleet = session_cookie(user, projects["fleet"])
        detail = session_cookie(user, projects["detail"])
        last = -(-self.opts["project_clusters"] // 50)

        def page(path, query, cookie, rows=None):
            return {"path": path, "query": query, "cookie": cookie, "rows": rows}

        found = {
            "floor": page("/__bench__/floor/", "", fleet),
            "list": page("/clusters/", "", fleet, 50),
            "list last": page("/clusters/", f"page={last}", fleet),
        }
        for size, cluster in wide.items():
            found[f"members {size}"] = page(f"/clusters/{cluster.pk}/vms/", "", detail, size)
            found[f"metrics {size}"] = page(
                f"/clusters/{cluster.pk}/metrics/charts/", "range=1h", detail
            )
            found[f"devices {size}"] = page(
                f"/clusters/{cluster.pk}/metrics/devices/", "range=1h", detail
            )
        vms = "/api/v1/virtual-machines"
        found["api floor"] = {"api": ("/__bench__/api-floor/", "", secret)}
        found["api vms"] = {"api": (vms, "page_size=100", secret), "rows": 100}
        found["api vms last"] = {
            "api": (vms, f"page_size=100&page_token={last_token(handler, vms, secret)}", secret)
        }
        return found

    @staticmethod
    def send(handler, r):
        return call(handler, *r["api"]) if "api" in r else request(handler, r)

    def check_answer(self, handler, key, r):
        """(queries, bytes) of one answer, after checking it is a 200 with its rows."""
        self.send(handler, r)
        with CaptureQueriesContext(connection) as queries:
            status, body = self.send(handler, r)
        if not status.startswith("200"):
            raise CommandError(f"{key} answered {status}: {body[:300]!r}")
        rows = r.get("rows")
        if rows is not None:
            shown = (
                len(json.loads(body)["items"])
                if "api" in r
                else body.count(
                    b"data-vm=" if key.startswith("members") else b'<td class="num" data-label='
                )
            )
            if shown != rows:
                raise CommandError(f"{key}: {shown} rows shown, {rows} expected")
        return len(queries), len(body)

    def measure_requests(self, handler, requests):
        for _round in range(self.opts["warmup"]):
            for r in requests.values():
                self.send(handler, r)
        rng, order = random.Random(self.opts["seed"]), list(requests)
        times = {key: [] for key in requests}
        for _round in range(self.opts["rounds"]):
            rng.shuffle(order)
            for key in order:
                began = time.perf_counter()
                status, _body = self.send(handler, requests[key])
                times[key].append((time.perf_counter() - began) * 1000)
                if not status.startswith("200"):
                    raise CommandError(f"{key} answered {status}")
        return times

    def report(self, requests, counts, times, small, large):
        median = {key: statistics.median(values) for key, values in times.items()}
        self.say(
            f"\n{self.opts['rounds']} rounds, shuffled (--seed {self.opts['seed']}); ms; "
            "x floor = median / its floor's median (the token floor for api)"
        )
        self.say(
            f"{'request':16} {'queries':>7} {'KiB':>7} {'median':>8} {'p95':>8} {'x floor':>8}"
        )
        for key, values in times.items():
            floor = median["api floor" if key.startswith("api") else "floor"]
            p95 = statistics.quantiles(values, n=20, method="inclusive")[-1]
            queries, size = counts[key]
            self.say(
                f"{key:16} {queries:>7} {size / 1024:>7.1f} {median[key]:>8.2f} {p95:>8.2f} "
                f"{median[key] / floor:>8.2f}"
            )
        checks = [
            ("cluster list <= 2.5x floor", median["list"] / median["floor"], TARGETS["list"]),
            ("its last page <= 1.3x its first", median["list last"] / median["list"],
             TARGETS["last_page"]),
            ("API VM page <= 3x token floor", median["api vms"] / median["api floor"],
             TARGETS["api"]),
            ("its last page <= 1.3x its first", median["api vms last"] / median["api vms"],
             TARGETS["last_page"]),
        ]  # fmt: skip
        for kind in ("members", "metrics", "devices"):
            ratio = median[f"{kind} {large}"] / median[f"{kind} {small}"]
            checks.append((f"{kind} at {large} <= 2x at {small}", ratio, TARGETS["growth"]))
        self.say(
            f"\ntargets ({self.opts['project_clusters']:,} clusters of "
            f"{self.opts['total_clusters']:,}; {self.opts['api_vms']:,} VMs):"
        )
        for label, ratio, limit in checks:
            self.say(f"  {'met' if ratio <= limit else 'MISSED':6} {label:40} {ratio:.2f}x")

    def browser(self, user, cluster):
        """Chromium opening the wide cluster's 메트릭 tab to its heatmap, ``--samples`` times
        in a new profile each: ms from the click, the longest task, long tasks' sum."""
        cookie = session_cookie(user, cluster.project)
        base = self.start_portal()
        from playwright.sync_api import sync_playwright

        name, value = cookie.split("=", 1)
        found = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=bench_first_chart.CHROMIUM, args=bench_first_chart.CHROMIUM_ARGS
            )
            try:
                for _sample in range(self.opts["samples"]):
                    context = browser.new_context(
                        viewport={"width": 1280, "height": 900}, locale="ko-KR"
                    )
                    try:
                        context.add_cookies([{"name": name, "value": value, "url": base}])
                        context.add_init_script(WATCH_HEATMAP)
                        found.append(self.open_heatmap(context.new_page(), base, cluster.pk))
                    finally:
                        context.close()
            finally:
                browser.close()
        members = cluster.members.count()
        self.say(f"\nChromium, the {members}-member cluster's heatmap ({members} x 8 cells):")
        for sample in found:
            self.say(
                f"  click to heatmap {sample['drawn']:.0f} ms; longest task "
                f"{sample['longest']:.0f} ms; long tasks {sample['blocked']:.0f} ms in all"
            )
        worst = max(sample["longest"] for sample in found)
        verdict = "met" if worst <= TARGETS["longest_task_ms"] else "MISSED"
        self.say(
            f"  {verdict:6} no task over {TARGETS['longest_task_ms']:.0f} ms (worst {worst:.0f})"
        )

    @staticmethod
    def open_heatmap(page, base, cluster_pk):
        page.goto(f"{base}/clusters/{cluster_pk}/", wait_until="load")
        opened, _sent = page.evaluate(bench_first_chart.CLICK)
        page.wait_for_function("() => window.__heatmap !== null", timeout=180_000)
        page.wait_for_timeout(500)  # a long task still running is reported once it ends
        drawn, ready, tasks = page.evaluate(
            "() => [window.__heatmap, window.__plotlyReady, window.__longTasks]"
        )
        after = [duration for start, duration in tasks if start >= max(opened, ready or 0)]
        return {
            "drawn": drawn - opened,
            "longest": max(after, default=0.0),
            "blocked": sum(duration - 50 for duration in after),
        }
