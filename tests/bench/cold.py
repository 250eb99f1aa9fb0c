"""``python -m tests.bench.cold``: one page's first request in a fresh process, for
bench_pages. Django is set up (apps and models loaded, as a server worker has them before
its first request); the URLconf, the views, the templates and the database connection are
not, so the first request pays for them as it does after a restart. Reads the page as JSON
on stdin ({"path", "query", "cookie"}); prints {"status", "cold", "second"} (ms)."""

import json
import sys
import time

import django

django.setup()

from django.core.handlers.wsgi import WSGIHandler  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from tests.bench.inprocess import BENCH_SETTINGS, request  # noqa: E402

page = json.load(sys.stdin)
with override_settings(**BENCH_SETTINGS):
    handler = WSGIHandler()
    times = []
    for _ in range(2):
        started = time.perf_counter()
        status, _body = request(handler, page)
        times.append((time.perf_counter() - started) * 1000)
json.dump({"status": status, "cold": times[0], "second": times[1]}, sys.stdout)
