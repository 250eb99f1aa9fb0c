"""The ingest hot path's database round trips, counted on the wire (libpq's trace): an
on-time agent batch is one statement that checks the token as it inserts, and stays so.

Django's query log cannot see it (the INSERT runs on a psycopg cursor of its own, to be
prepared server-side), hence the trace. Autocommit as in production: inside a test
transaction every statement would take a savepoint and its release too.
"""

import tempfile
import time
from contextlib import contextmanager
from datetime import timedelta

import psycopg
import pytest
from django.core.cache import cache
from django.core.cache.backends.locmem import LocMemCache
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from metrics import liveness
from metrics.models import GpuSample, MetricsToken, PortSample, Sample
from tests.metrics.conftest import sample
from tests.metrics.test_devices import gpus, ports

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's wire protocol"),
]


@contextmanager
def round_trips():
    """Yields a list that holds, after the block, the round trips the block made: the
    server's ReadyForQuery messages, one per Sync or simple query."""
    counted = []
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = trace.read().decode(errors="replace").splitlines()
    counted.extend(line for line in lines if "\tReadyForQuery" in line)


@pytest.fixture(autouse=True)
def _fresh_rate_window():
    cache.clear()


def test_an_on_time_agent_batch_is_one_round_trip(post, token):
    now = time.time()
    # The first batch of a size prepares its statement on this connection.
    assert post(token, {"samples": [sample(now - 20), sample(now - 15)]}).status_code == 200
    with round_trips() as trips:
        response = post(token, {"samples": [sample(now - 10), sample(now - 5)]})
    assert response.status_code == 200, response.content
    assert len(trips) == 1
    assert Sample.objects.count() == 4


def test_an_agent_batch_with_8_gpus_and_4_ports_is_still_one_round_trip(post, token):
    now = time.time()
    first = sample(now - 20, gpus=gpus(), ports=ports())
    assert post(token, {"samples": [first]}).status_code == 200
    with round_trips() as trips:
        response = post(token, {"samples": [sample(now - 10, gpus=gpus(), ports=ports())]})
    assert response.status_code == 200, response.content
    assert len(trips) == 1
    assert (GpuSample.objects.count(), PortSample.objects.count()) == (16, 8)


def test_an_agent_batch_notes_the_agents_call_in_the_same_round_trip(post, token):
    """A fleet's web processes each see a token less often than ``WRITE_EVERY``: the call is
    noted by the batch's own statement whatever this process remembers, not by an UPDATE
    of its own (a second round trip and a WAL flush), and only once per ``WRITE_EVERY``."""
    now = time.time()
    assert (
        post(token, {"samples": [sample(now - 20, gpus=gpus(), ports=ports())]}).status_code == 200
    )
    stale = timezone.now() - timedelta(seconds=liveness.WRITE_EVERY + 1)
    MetricsToken.objects.update(last_seen_at=stale)
    liveness.forget()  # a process that has not seen this token yet
    with round_trips() as trips:
        response = post(token, {"samples": [sample(now - 10, gpus=gpus(), ports=ports())]})
    assert response.status_code == 200, response.content
    assert len(trips) == 1
    (noted,) = MetricsToken.objects.values_list("last_seen_at", flat=True)
    assert noted > stale
    liveness.forget()
    assert (
        post(token, {"samples": [sample(now - 5, gpus=gpus(), ports=ports())]}).status_code == 200
    )
    assert MetricsToken.objects.get().last_seen_at == noted  # within WRITE_EVERY of the last


def test_a_bad_token_costs_the_insert_and_one_lookup(post, token):
    now = time.time()
    assert post(token, {"samples": [sample(now - 20)]}).status_code == 200
    with round_trips() as trips:
        response = post("vcm_" + "ef" * 16, {"samples": [sample(now - 10)]})
    assert response.status_code == 401
    assert len(trips) == 2


class CountingCache(LocMemCache):
    """The local-memory cache, counting the operations made on it."""

    operations = []

    def incr(self, *args, **kwargs):
        self.operations.append("incr")
        return super().incr(*args, **kwargs)

    def add(self, *args, **kwargs):
        self.operations.append("add")
        return super().add(*args, **kwargs)

    def get_many(self, *args, **kwargs):
        self.operations.append("get_many")
        return super().get_many(*args, **kwargs)


@override_settings(CACHES={"default": {"BACKEND": f"{__name__}.CountingCache"}})
def test_the_rate_limit_costs_one_cache_operation(post, token):
    """The first request of a window opens it once the token is verified (a miss, an add);
    each one after is one increment. A made-up token creates nothing (one miss)."""
    now = time.time()
    operations = CountingCache.operations
    operations.clear()
    assert post(token, {"samples": [sample(now - 20)]}).status_code == 200
    assert operations == ["incr", "add"]
    operations.clear()
    assert post(token, {"samples": [sample(now - 10)]}).status_code == 200
    assert operations == ["incr"]
    operations.clear()
    assert post("vcm_" + "ab" * 16, {"samples": [sample(now)]}).status_code == 401
    assert operations == ["incr"]
    assert len(cache._cache) == 1  # the verified token's window only
