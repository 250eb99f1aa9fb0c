"""``manage.py bench_api``: server time and query counts of the API's cluster list and
detail and a cluster's 256 members, each divided by a floor measured in the same run.

Like ``bench_pages``: PostgreSQL only, a scratch database of its own (``tests.bench.scratch``),
requests straight into Django's WSGI handler with the full middleware stack. The floor is a
trivial view authenticated the same way as the API (the bearer token: ``tests.bench.api_urls``).

- ``GET virtual-clusters?page_size=50`` of a project with 10 and with ``--clusters``
  (10,000) clusters of two members each; the last page is also timed, reached by following
  ``next_page_token``;
- ``GET virtual-clusters/{id}``;
- the 256 members of a cluster, both ways: ``GET virtual-machines?cluster={id}`` and
  ``GET virtual-clusters/{id}/members`` (``page_size=500``: all of them in one answer).

Targets: list at 10,000 <= 3x floor, detail <= 2x floor, the 256 members <= 4x floor
(medians), query counts equal at 10 and 10,000. Rounds are shuffled every round (``--seed``).
"""

import cProfile
import io
import json
import pstats
import random
import statistics
import time

from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from clusters.models import ClusterStatus
from portal.iam import tokens
from portal.models import Project, Role, RoleBinding
from tests.bench.command import BenchCommand
from tests.bench.inprocess import BENCH_SETTINGS, environ
from tests.bench.worlds import bench_catalog, clusters_with_members
from vms.models import BillingType, VmStatus

TARGETS = {"list10k": 3.0, "detail": 2.0, "vms256": 4.0, "members256": 4.0}
WIDE = 256  # members of the wide cluster
API_SETTINGS = {
    **BENCH_SETTINGS,
    "ROOT_URLCONF": "tests.bench.api_urls",
    "API_RATE_PER_MINUTE": 10**9,  # the counter still runs; its limit must not
}


def call(handler, path: str, query: str, token: str) -> tuple[str, bytes]:
    env = environ(path, query, "")
    env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    status = []
    result = handler(env, lambda s, headers, exc_info=None: status.append(s))
    try:
        return status[0], b"".join(result)
    finally:
        result.close()


def last_token(handler, path: str, secret: str) -> str:
    """The page_token of the last page of the list at ``path`` (followed page by page)."""
    query, token = "page_size=500", ""
    while True:
        _status, body = call(handler, path, query, secret)
        following = json.loads(body)["next_page_token"]
        if following is None:
            return token
        token, query = following, f"page_size=500&page_token={following}"


class Command(BenchCommand):
    help = "Benchmark the API's cluster list and detail against a token-authenticated floor."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--rounds", type=int, default=200)
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--clusters", type=int, default=10_000, help="the large project")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--profile", metavar="REQUEST", help="cProfile one request instead")

    def refusal(self, opts):
        if opts["rounds"] < 2 or opts["clusters"] < 100:
            return "--rounds must be >= 2 and --clusters >= 100"
        return ""

    def around(self):
        return override_settings(**API_SETTINGS)

    def world(self):
        zone, h100, _capacity = bench_catalog()
        user = get_user_model().objects.create_user("bench", password="bench-pass-1234")
        admin = Role.objects.get(name="admin")
        secrets, clusters = {}, {}
        statuses = [ClusterStatus.RUNNING, ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED]
        for slug, count in (("small", 10), ("large", self.opts["clusters"])):
            project = Project.objects.create(slug=slug, name=slug)
            RoleBinding.objects.create(user=user, project=project, role=admin)
            clusters[slug] = clusters_with_members(
                project, zone, h100, count, lambda _i: 2, name=f"{slug}-cluster",
                status=lambda i: statuses[i % 3],
                member=lambda i, j: {"private_ip": f"10.{j}.{i // 250}.{i % 250 + 2}"},
                created_by=user,
            )  # fmt: skip
            secrets[slug] = tokens.issue_token(user=user, project_id=project.pk, name="bench")[1]
        (clusters["wide"],) = clusters_with_members(
            Project.objects.get(slug="large"), zone, h100, 1, lambda _i: WIDE, name="wide",
            status=lambda _i: ClusterStatus.RUNNING, created_by=user,
            member=lambda _i, j: {
                "status": VmStatus.RUNNING if j % 4 else VmStatus.STOPPED,
                "billing_type": BillingType.RESERVED,
                "private_ip": f"10.9.{j // 250}.{j % 250 + 2}",
                "fabric_guid": f"0x248a0703{j:08x}",
                "fabric_lid": j + 1,
            },
        )  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        return secrets, clusters

    def run_bench(self):
        started = time.perf_counter()
        secrets, clusters = self.world()
        self.say(
            f"data: 10 + {self.opts['clusters']:,} clusters ({time.perf_counter() - started:.1f} s)"
        )
        handler = WSGIHandler()
        list_path = "/api/v1/virtual-clusters"
        pages = {
            "floor": ("/__bench__/api-floor/", "", secrets["large"]),
            "list10": (list_path, "page_size=50", secrets["small"]),
            "list10k": (list_path, "page_size=50", secrets["large"]),
            "last10k": (
                list_path,
                "page_size=50&page_token="
                + last_token(handler, "/api/v1/virtual-clusters", secrets["large"]),
                secrets["large"],
            ),
            "detail": (f"{list_path}/{clusters['large'][-1].pk}", "", secrets["large"]),
            "vms256": (
                "/api/v1/virtual-machines",
                f"cluster={clusters['wide'].pk}&page_size=500",
                secrets["large"],
            ),
            "members256": (
                f"{list_path}/{clusters['wide'].pk}/members",
                "page_size=500",
                secrets["large"],
            ),
        }
        for secret in secrets.values():  # last_used_at written now, not inside a count
            call(handler, "/__bench__/api-floor/", "", secret)
        counts = {key: self.count_queries(handler, key, page) for key, page in pages.items()}
        if self.opts["profile"]:
            return self.profile(handler, pages)
        for _round in range(self.opts["warmup"]):
            for page in pages.values():
                call(handler, *page)
        rng = random.Random(self.opts["seed"])
        samples = {key: [] for key in pages}
        order = list(pages)
        for _round in range(self.opts["rounds"]):
            rng.shuffle(order)
            for key in order:
                started = time.perf_counter()
                status, _body = call(handler, *pages[key])
                samples[key].append((time.perf_counter() - started) * 1000)
                if not status.startswith("200"):
                    raise CommandError(f"{key} answered {status}")
        self.report(counts, samples)
        return None

    def profile(self, handler, pages):
        """The cProfile of ``--rounds`` calls of one request, by cumulative and own time."""
        page = pages.get(self.opts["profile"])
        if page is None:
            raise CommandError(f"--profile takes one of {', '.join(pages)}")
        for _round in range(self.opts["warmup"]):
            call(handler, *page)
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for _round in range(self.opts["rounds"]):
            call(handler, *page)
        profiler.disable()
        per = (time.perf_counter() - started) / self.opts["rounds"] * 1000
        self.say(f"{self.opts['profile']}: {per:.2f} ms/request under the profiler")
        for order, count in (("cumulative", 40), ("tottime", 25)):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order).print_stats(count)
            self.say(out.getvalue())

    def count_queries(self, handler, key, page) -> tuple[int, int]:
        """(queries, bytes) of one answer, after checking it holds the rows it should."""
        with CaptureQueriesContext(connection) as queries:
            status, body = call(handler, *page)
        if not status.startswith("200"):
            raise CommandError(f"{key} answered {status}: {body[:300]!r}")
        expected = {"list10": 10, "list10k": 50, "vms256": WIDE, "members256": WIDE}.get(key)
        if expected is not None and len(json.loads(body)["items"]) != expected:
            raise CommandError(f"{key}: wrong number of rows")
        return len(queries), len(body)

    def report(self, counts, samples):
        floor = statistics.median(samples["floor"])
        self.say(f"\n{self.opts['rounds']} rounds, shuffled (--seed {self.opts['seed']}); ms")
        self.say(
            f"{'request':10} {'queries':>7} {'KiB':>6} {'median':>8} {'p95':>8} {'x floor':>8}"
        )
        for key, values in samples.items():
            median = statistics.median(values)
            p95 = statistics.quantiles(values, n=20, method="inclusive")[-1]
            queries, size = counts[key]
            self.say(
                f"{key:10} {queries:>7} {size / 1024:>6.1f} {median:>8.2f} {p95:>8.2f} "
                f"{median / floor:>8.2f}"
            )
        checks = [
            (
                "queries equal at 10 and 10,000",
                f"{counts['list10'][0]} vs {counts['list10k'][0]}",
                counts["list10"][0] == counts["list10k"][0],
            ),
        ]
        for key, limit in TARGETS.items():
            ratio = statistics.median(samples[key]) / floor
            checks.append((f"{key} <= {limit:g}x floor (median)", f"{ratio:.2f}x", ratio <= limit))
        self.say("\ntargets:")
        for label, figure, ok in checks:
            self.say(f"  {'met' if ok else 'MISSED':6} {label:40} {figure}")
