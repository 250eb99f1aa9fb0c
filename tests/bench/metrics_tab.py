"""bench_metrics' 메트릭 tab part: the tab's server time per range over the request floor
measured in the same rounds, through Django's WSGI handler in this process as bench_pages
does (the full middleware stack, no HTTP, no test-client instrumentation; ``inprocess``).

Pages, in an order shuffled every round: the floor (a ``login_required`` view answering
"ok"), the tab as it opens (the whole panel) at 1h, 6h, 24h and 7d, in per-member mode, and
the per-device panel (slowest GPU and port, heatmap, 하위 5: its own request, loaded by the
tab once its charts are on screen). Per page: query count, size, median and p95 server time,
SQL time within, and median over the floor's median.
"""

import random
import statistics
import time

from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from tests.bench.inprocess import BENCH_SETTINGS, request, session_cookie, sql_timer

RANGES = ("1h", "6h", "24h", "7d")
TARGET = 20.0  # the tab at each range, over the floor (median)


def _pages(cluster, cookie):
    def page(key, path, query="", expect=b""):
        return {"key": key, "path": path, "query": query, "cookie": cookie, "expect": expect}

    charts = f"/clusters/{cluster.pk}/metrics/charts/"
    devices = f"/clusters/{cluster.pk}/metrics/devices/"
    pages = [page("floor", "/__bench__/floor/", expect=b"ok")]
    pages += [page(f"tab {k}", charts, f"range={k}", b"metrics-fig-gpu") for k in RANGES]
    pages += [
        page(f"per member {k}", charts, f"range={k}&per_member=1", b"metrics-fig-gpu")
        for k in RANGES
    ]
    pages += [page(f"devices {k}", devices, f"range={k}", b"metrics-fig-heatmap") for k in RANGES]
    return pages


def _check(handler, page):
    """(queries, bytes) of one request, after checking it shows what it should."""
    with CaptureQueriesContext(connection) as queries:
        status, body = request(handler, page)
    if not status.startswith("200") or page["expect"] not in body:
        raise RuntimeError(f"{page['key']}: {status}, {page['expect']!r} not in the answer")
    return len(queries), len(body)


def bench(cluster, user, project, say, rounds=15, warmup=3, seed=1) -> dict:
    """Measure; print a table; return {key: {"median", "p95", "sql", "queries", "bytes"}}
    with "floor" among the keys."""
    with override_settings(**BENCH_SETTINGS):
        handler = WSGIHandler()
        pages = _pages(cluster, session_cookie(user, project))
        counts = {page["key"]: _check(handler, page) for page in pages}
        for _round in range(warmup):
            for page in pages:
                request(handler, page)
        samples = {page["key"]: {"wall": [], "sql": []} for page in pages}
        rng, order = random.Random(seed), list(pages)
        for _round in range(rounds):
            rng.shuffle(order)
            for page in order:
                sql = [0.0]
                with sql_timer(sql):
                    started = time.perf_counter()
                    request(handler, page)
                    elapsed = time.perf_counter() - started
                samples[page["key"]]["wall"].append(elapsed * 1000)
                samples[page["key"]]["sql"].append(sql[0] * 1000)
    results = {}
    for page in pages:
        wall = samples[page["key"]]["wall"]
        results[page["key"]] = {
            "median": statistics.median(wall),
            "p95": statistics.quantiles(wall, n=20, method="inclusive")[-1],
            "sql": statistics.median(samples[page["key"]]["sql"]),
            "queries": counts[page["key"]][0],
            "bytes": counts[page["key"]][1],
        }
    floor = results["floor"]["median"]
    say(
        f"metrics tab through the WSGI handler, {rounds} rounds in a shuffled order after "
        f"{warmup} warm-ups; ms; x floor = median / the floor's median"
    )
    header = (
        f"  {'page':18} {'queries':>7} {'KB':>6} {'median':>8} {'p95':>8} {'SQL':>8} {'x floor':>8}"
    )
    say(header)
    for page in pages:
        r = results[page["key"]]
        say(
            f"  {page['key']:18} {r['queries']:>7} {r['bytes'] / 1024:>6.1f} {r['median']:>8.2f} "
            f"{r['p95']:>8.2f} {r['sql']:>8.2f} {r['median'] / floor:>8.1f}"
        )
    return results
