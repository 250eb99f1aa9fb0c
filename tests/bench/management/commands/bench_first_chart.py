"""``manage.py bench_first_chart``: opening the 메트릭 tab to its first chart drawn, in
Chromium, on an idle machine and on a loaded one. Target: <= 1 s.

On PostgreSQL, in a scratch database of its own (``tests.bench.scratch``): one running
cluster of ``--vms`` members (8 GPUs and 4 ports each) with ``--hours`` of 10-second samples,
rolled up (``tests.bench.samples``). The portal runs as in production minus TLS: gunicorn
(2 workers x 4 threads, DEBUG off) on a loopback port, the static files collected into a
temporary folder and served by WhiteNoise. Chromium is Debian's (``/usr/bin/chromium``,
headless, driven by Playwright), 1280 x 900, signed in by a session cookie.

A sample opens the cluster's 정보 tab, waits for the page to load, and clicks 메트릭; the
figure is the time from the click to the first chart drawn (a plotly chart's SVG in the tab:
a MutationObserver in the page, on the page's own clock; the click counted from when it was
sent, should the page's main thread be busy then), and besides it when the tab's frame, the
charts' answer and plotly.js had arrived (Resource Timing). Two kinds of sample:

- cold: a new browser profile (nothing cached), as on a first visit, clicking as soon as the
  page has loaded;
- later: a new browser profile whose page has sat idle (the cluster page runs plotly.js once
  idle, static/metrics/charts.js) until plotly.js is ready, then the click: a first visit's
  reader who looks at the 정보 tab first. Besides it, how long after the page's load plotly.js
  was ready;
- warm: the same profile as cold opening the tab a third time (plotly.js from the HTTP cache,
  its compiled code from Chromium's code cache, which keeps it from a script's second run).

Every sample is taken idle, then loaded: one process per CPU spinning at normal priority
for the whole loaded round, so that the browser, gunicorn and PostgreSQL share the CPUs
with as many busy processes as there are CPUs (a load average of at least the CPU count).
Printed per round: each sample, p50 and max, met or missed against the target.
"""

import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.bench import samples
from tests.bench.command import BenchCommand
from tests.bench.inprocess import session_cookie
from tests.bench.processes import children_in_tempdir, free_port, gunicorn_command
from tests.bench.scratch import database_url
from tests.bench.worlds import metrics_world

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
TARGET_MS = 1000.0
# Installed in every page before its scripts: the page-clock time the first plotly chart
# of the 메트릭 tab has its SVG (plotly adds it while drawing; the observer runs once the
# drawing script yields).
WATCH = """
window.__firstChart = null;
window.__plotlyReady = null;
window.__chartsSwapped = null;
Object.defineProperty(window, "Plotly", {
  configurable: true,
  set(value) {
    Object.defineProperty(window, "Plotly", {value, writable: true, configurable: true});
    window.__plotlyReady = performance.now();
  },
});
document.addEventListener("htmx:afterSwap", (event) => {
  if (event.detail.target.id === "metrics-charts") window.__chartsSwapped = performance.now();
});
new MutationObserver((changes, observer) => {
  if (document.querySelector("#metrics-body .js-plotly-plot .main-svg")) {
    window.__firstChart = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""
# Whether the page runs plotly.js once idle (the 메트릭 tab's link names it).
PRELOADS = """() => Boolean(document.getElementById("tab-metrics").dataset.plotlySrc)"""
# What a sample's medians are printed of.
PARTS = (
    "click delay",
    "frame",
    "charts",
    "swapped",
    "plotly",
    "plotly ready",
    "chart",
    "ready after load",
)
# The page-clock ms from the page's load event to its plotly.js ready.
READY_AFTER_LOAD = """() =>
  window.__plotlyReady - performance.getEntriesByType("navigation")[0].loadEventEnd"""
# Click 메트릭 and return the page-clock time of the click, and the same as a Unix time in
# ms (to tell how long the page's main thread kept the click waiting).
CLICK = """() => {
  const opened = performance.now();
  document.getElementById("tab-metrics").click();
  return [opened, performance.timeOrigin + opened];
}"""
# When the tab's frame, the charts' answer and plotly.js had arrived (page clock).
ARRIVED = """(parts) => {
  const ends = {};
  for (const [name, part] of Object.entries(parts)) {
    const entry = performance.getEntriesByType("resource")
      .filter(e => new URL(e.name).pathname.endsWith(part)).pop();
    ends[name] = entry ? entry.responseEnd : null;
  }
  return ends;
}"""


class Command(BenchCommand):
    help = "Time opening the 메트릭 tab to its first chart in Chromium, idle and loaded."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--samples", type=int, default=7, help="per kind and round")
        parser.add_argument("--vms", type=int, default=16, help="cluster members")
        parser.add_argument("--hours", type=int, default=2, help="hours of samples")
        parser.add_argument(
            "--burners", type=int, default=os.cpu_count() or 1, help="busy processes when loaded"
        )

    def refusal(self, opts):
        if not Path(CHROMIUM).exists():
            return f"bench_first_chart needs Chromium at {CHROMIUM}"
        if opts["samples"] < 1 or opts["vms"] < 2 or opts["hours"] < 1:
            return "--samples >= 1, --vms >= 2 and --hours >= 1"
        return ""

    @contextmanager
    def around(self):
        with children_in_tempdir("bench-first-chart-") as children:
            self.children, self.workdir = children, children.workdir
            yield

    def run_bench(self):
        cluster, vms, _tokens = metrics_world(self.opts["vms"])
        span = timedelta(hours=self.opts["hours"])
        samples.generate(cluster, vms, timezone.now(), span, self.say)
        user = get_user_model().objects.create_superuser("bench", password="bench-only-1234")
        cookie = session_cookie(user, cluster.project)
        base = self.start_portal()
        rounds = {}
        # Playwright's sync API runs an event loop in this thread: the ORM is done by now.
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                self.measure(browser, base, cluster.pk, cookie, "warm-up", samples=1)
                rounds["idle"] = self.measure(browser, base, cluster.pk, cookie, "idle")
                with self.burning():
                    rounds["loaded"] = self.measure(browser, base, cluster.pk, cookie, "loaded")
            finally:
                browser.close()
        self.say("")
        self.say(f"== first chart after opening the 메트릭 tab (target <= {TARGET_MS:.0f} ms) ==")
        for name, kinds in rounds.items():
            for kind, timings in kinds.items():
                first = [t["chart"] for t in timings]
                p50, worst = statistics.median(first), max(first)
                self.say(
                    f"{name:<6} {kind:<4}: p50 {p50:4.0f} ms {self.verdict(p50)}, "
                    f"max {worst:4.0f} ms {self.verdict(worst)}  "
                    f"(samples: {', '.join(f'{t:.0f}' for t in first)})"
                )
        self.say(f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    @staticmethod
    def verdict(ms):
        return "met" if ms <= TARGET_MS else "MISSED"

    def start_portal(self):
        """gunicorn serving the scratch database, its static files collected and served by
        WhiteNoise as in production (DEBUG off finds no static file otherwise)."""
        static_root = self.workdir / "static"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "STATIC_ROOT": str(static_root),
        }
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            env=env,
            check=True,
        )
        port = free_port()
        server = self.children.spawn(gunicorn_command(port, 2, 4, keep_alive=30), "gunicorn", env)
        self.children.wait_listening(server, "gunicorn", port)
        self.say(f"gunicorn on 127.0.0.1:{port} (2 workers x 4 threads), static from WhiteNoise")
        return f"http://127.0.0.1:{port}"

    @contextmanager
    def burning(self):
        """``--burners`` processes spinning on the CPU until the block ends."""
        burners = [
            self.children.spawn(
                [sys.executable, "-c", "while True: pass"], f"burner-{i}", dict(os.environ)
            )
            for i in range(self.opts["burners"])
        ]
        self.say(f"{len(burners)} busy processes started")
        try:
            yield
        finally:
            for process in burners:
                process.kill()
                process.wait()

    def measure(self, browser, base, cluster_pk, cookie, name, samples=None):
        """{"cold": [timings], "later": [timings], "warm": [timings]}: each a dict of
        page-clock ms from the click (tab frame, charts, plotly.js arrived; chart drawn)."""
        self.say(f"{name}: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        name_, value = cookie.split("=", 1)
        page_url = f"{base}/clusters/{cluster_pk}/"
        result = {"cold": [], "later": [], "warm": []}
        for _sample in range(samples or self.opts["samples"]):
            with self.profile(browser, base, name_, value) as page:
                result["cold"].append(self.open_tab(page, page_url, cluster_pk))
                # Chromium keeps a script's compiled code from its second run on: the third
                # open is a returning user's.
                self.open_tab(page, page_url, cluster_pk)
                result["warm"].append(self.open_tab(page, page_url, cluster_pk))
            with self.profile(browser, base, name_, value) as page:
                later = self.open_tab(page, page_url, cluster_pk, later=True)
                if later is not None:
                    result["later"].append(later)
        if not result["later"]:  # a page that does not run plotly.js until the tab opens
            del result["later"]
        for kind, timings in result.items():
            medians = []
            for part in PARTS:
                values = [t[part] for t in timings if t[part] is not None]
                medians.append(f"{part} {statistics.median(values):.0f}" if values else f"{part} -")
            self.say(f"  {name} {kind}: median ms from the click: {', '.join(medians)}")
        return result

    @contextmanager
    def profile(self, browser, base, cookie_name, cookie_value):
        """A page in a new browser profile (nothing cached), signed in."""
        context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="ko-KR")
        try:
            context.add_cookies([{"name": cookie_name, "value": cookie_value, "url": base}])
            context.add_init_script(WATCH)
            yield context.new_page()
        finally:
            context.close()

    def open_tab(self, page, page_url, cluster_pk, later=False):
        """The timings of one open; ``later``: clicked once the page has run plotly.js, and
        "ready after load" the ms from the page's load to then (None: the page does not)."""
        page.goto(page_url, wait_until="load")
        ready_after_load = None
        if later:
            if not page.evaluate(PRELOADS):
                return None
            page.wait_for_function("() => window.__plotlyReady !== null", timeout=60_000)
            ready_after_load = page.evaluate(READY_AFTER_LOAD)
        asked = time.time() * 1000
        opened, clicked = page.evaluate(CLICK)
        # A page busy running a script (plotly.js run once idle) takes the click when done:
        # that wait counts in the first chart's time, as the reader waits it too.
        delay = max(0.0, clicked - asked)
        page.wait_for_function("() => window.__firstChart !== null", timeout=60_000)
        drawn, ready, swapped = page.evaluate(
            "() => [window.__firstChart, window.__plotlyReady, window.__chartsSwapped]"
        )
        plotly = page.evaluate(
            '() => new URL(document.getElementById("metrics-charts").dataset.plotlySrc,'
            " location).pathname"
        )
        arrived = page.evaluate(
            ARRIVED,
            {
                "frame": f"/clusters/{cluster_pk}/metrics/",
                "charts": f"/clusters/{cluster_pk}/metrics/charts/",
                "plotly": plotly,
            },
        )
        since = {key: (end - opened if end else None) for key, end in arrived.items()}
        return {
            **since,
            "swapped": swapped - opened,
            "plotly ready": ready - opened if ready else None,
            "chart": drawn - opened + delay,
            "click delay": delay,
            "ready after load": ready_after_load,
        }
