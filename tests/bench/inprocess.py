"""Requests straight into Django's WSGI handler, for bench_pages: the full middleware stack,
no HTTP and no test-client instrumentation; and the cold first request of a page, each in a
fresh process (``tests.bench.cold``)."""

import io
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

from django.conf import settings
from django.db import connection
from django.test import Client

from portal.iam.projects import SESSION_KEY
from tests.bench.scratch import database_url

# The bench's URLconf (the portal's plus the floor view) and the host the environ names.
BENCH_SETTINGS = {"ROOT_URLCONF": "tests.bench.urls", "ALLOWED_HOSTS": ["127.0.0.1"]}


def session_cookie(user, project) -> str:
    """A ``Cookie`` header of a logged-in session of ``user`` with ``project`` current."""
    client = Client()
    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = project.pk
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def environ(path: str, query: str, cookie: str) -> dict:
    return {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
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


def request(handler, page: dict) -> tuple[str, bytes]:
    """One GET of ``page`` (its path, query and cookie) through ``handler``: (status, body)."""
    status = []
    result = handler(
        environ(page["path"], page["query"], page["cookie"]),
        lambda s, headers, exc_info=None: status.append(s),
    )
    try:
        body = b"".join(result)
    finally:
        result.close()
    return status[0], body


@contextmanager
def sql_timer(totals: list[float]):
    """Add the seconds spent executing SQL inside the block to ``totals[0]``."""

    def wrapper(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            totals[0] += time.perf_counter() - started

    with connection.execute_wrapper(wrapper):
        yield


def cold_request(page: dict) -> dict:
    """The first and the second GET of ``page`` in a fresh process on the current database
    (``tests.bench.cold``): {"status", "cold", "second"}, times in ms."""
    fields = {key: page[key] for key in ("path", "query", "cookie")}
    result = subprocess.run(
        [sys.executable, "-m", "tests.bench.cold"],
        input=json.dumps(fields),
        cwd=settings.BASE_DIR,
        env={**os.environ, "DATABASE_URL": database_url()},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(result.stdout)
