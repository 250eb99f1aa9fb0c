"""A lost cache degrades, it never fails a request.

With the cache on a Redis of its own (``CACHE_URL``) stopped mid-traffic, token API calls,
agent job calls and metrics ingest are served and still rate limited, each process counting
on its own, with one warning per outage; ``/healthz`` answers 200 "degraded" while it is down.
Once it is back, the rates are counted in Redis again and ``/healthz`` is ok.

Failed before the fix: the rate counter's ConnectionError escaped token authentication and the
metrics token checks, so every such call answered 500.
"""

import logging
import time

import orjson
import pytest
import redis
from django.db import DatabaseError
from django.test import Client
from django.urls import reverse

from metrics import services as metrics_services
from portal.iam import throttle, tokens
from tests.conftest import PASSWORD
from tests.metrics.conftest import sample
from vms.models import VmStatus

pytestmark = pytest.mark.django_db
LIMIT = 3
REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"


def _fresh_throttle():
    throttle.FALLBACK.clear()
    throttle.OUTAGE.down = False


@pytest.fixture
def cache_server(redis_server, settings):
    """The module's private redis-server as the default cache, as ``CACHE_URL`` sets it
    (changing CACHES drops the cache connections Django holds); every rate at ``LIMIT``."""
    if redis_server.process is None:
        redis_server.start()
    redis_server.flush()
    settings.CACHES = {"default": {"BACKEND": REDIS_CACHE, "LOCATION": redis_server.url}}
    settings.API_RATE_PER_MINUTE = LIMIT
    settings.METRICS_RATE_PER_MINUTE = LIMIT
    settings.METRICS_JOBS_RATE_PER_MINUTE = LIMIT
    _fresh_throttle()
    yield redis_server
    _fresh_throttle()
    if redis_server.process is None:
        redis_server.start()


@pytest.fixture
def calls(world):
    """{kind: call}: a token API read, an agent's job poll, a metrics batch (each its own
    rate), on a client that answers 500 rather than raising."""
    web = Client(raise_request_exception=False)
    _token, api_secret = tokens.issue_token(
        user=world.users["viewer"], project_id=world.demo.pk, name="t"
    )
    vm = world.vm("cache-node", status=VmStatus.RUNNING)
    agent = {"Authorization": f"Bearer {metrics_services.rotate_token(vm.pk, actor=None)[1]}"}
    stamps = iter(range(1000))
    now = time.time()

    def ingest():
        batch = orjson.dumps({"samples": [sample(now - next(stamps))]})
        return web.generic(
            "POST", reverse("metrics:ingest"), batch, content_type="application/json", headers=agent
        )

    return {
        "api-rate": lambda: web.get(
            "/api/v1/zones", headers={"Authorization": f"Bearer {api_secret}"}
        ),
        "metrics-jobs-rate": lambda: web.post("/api/metrics/jobs/next", headers=agent),
        "metrics-rate": ingest,
    }


def counted_in_redis(server):
    """{counter prefix: count} of every window in the Redis (keys are ``:1:<prefix>:<key>``)."""
    client = redis.Redis.from_url(server.url)
    try:
        return {key.decode().split(":")[2]: int(client.get(key)) for key in client.keys("*")}
    finally:
        client.close()


def counted_in_fallback():
    """{counter prefix: count} of every window in this process's fallback."""
    return {
        key.split(":")[2]: int(throttle.FALLBACK.get(key.split(":", 2)[2]))
        for key in list(throttle.FALLBACK._cache)
    }


def throttle_lines(caplog, level):
    return [r for r in caplog.records if r.name == "portal.iam.throttle" and r.levelno == level]


def test_a_lost_cache_serves_limited_per_process_and_counts_in_redis_once_back(
    cache_server, calls, client, caplog
):
    caplog.set_level(logging.INFO, logger="portal.iam.throttle")
    for call in calls.values():
        assert call().status_code == 200
    assert counted_in_redis(cache_server) == dict.fromkeys(calls, 1)

    cache_server.kill()

    for kind, call in calls.items():
        statuses = [call().status_code for _ in range(LIMIT + 1)]
        assert statuses == [200] * LIMIT + [429], kind
    assert counted_in_fallback() == dict.fromkeys(calls, LIMIT + 1)
    health = client.get(reverse("healthz"))
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["cache"] == "error: ConnectionError"
    assert health.json()["database"] == health.json()["broker"] == "ok"
    assert len(throttle_lines(caplog, logging.WARNING)) == 1  # one for the outage
    assert "ConnectionError" in throttle_lines(caplog, logging.WARNING)[0].getMessage()

    cache_server.start()  # the same port, empty: no persistence

    for call in calls.values():
        assert call().status_code == 200
    assert len(throttle_lines(caplog, logging.INFO)) == 1  # the outage ended
    assert counted_in_redis(cache_server) == dict.fromkeys(calls, 1)
    assert counted_in_fallback() == dict.fromkeys(calls, LIMIT + 1)  # untouched since
    health = client.get(reverse("healthz"))
    assert (health.status_code, health.json()["status"], health.json()["cache"]) == (
        200,
        "ok",
        "ok",
    )
    assert len(throttle_lines(caplog, logging.INFO)) == 1

    cache_server.kill()  # a second outage is told once more...
    # ...and resumes this process's windows of the first, still open: limited, never a 500
    assert [call().status_code for call in calls.values()] == [429] * len(calls)
    assert client.get(reverse("healthz")).json()["status"] == "degraded"
    assert len(throttle_lines(caplog, logging.WARNING)) == 2


def test_healthz_while_the_cache_is_lost_still_fails_on_the_database(
    cache_server, client, monkeypatch
):
    """The cache is the only dependency whose loss keeps 200: a lost database is 503 still."""
    from portal.web import views

    class DeadConnection:
        def cursor(self):
            raise DatabaseError("connection refused")

    cache_server.kill()
    monkeypatch.setattr(views, "connection", DeadConnection())
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json()["status"] == "error"
    assert response.json()["cache"] == "error: ConnectionError"


def test_the_console_needs_no_cache(cache_server, world, caplog):
    """Sign-in (its failures are counted in the database) and a page are served with the
    cache lost, and touch no cache at all."""
    cache_server.kill()
    web = Client(raise_request_exception=False)
    login = reverse("login")
    refused = web.post(login, {"username": "viewer", "password": "wrong"})
    assert refused.status_code == 200 and "올바르지" in refused.content.decode()
    assert web.post(login, {"username": "viewer", "password": PASSWORD}).status_code == 302
    assert web.get(reverse("clusters:cluster_list")).status_code == 200
    assert throttle_lines(caplog, logging.WARNING) == []  # nothing asked the cache
