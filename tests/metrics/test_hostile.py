"""Hostile ingest bodies: every one is a 4xx naming what is wrong, never a 500, and nothing
is stored."""

import time
from datetime import UTC, datetime

import orjson
import pytest
from django.core.cache import cache
from django.db import connection

from metrics.models import Sample
from tests.metrics.conftest import sample

BIGINT_MAX = 2**63 - 1


@pytest.fixture(autouse=True)
def _fresh_rate_window():
    cache.clear()


def _refused(response, status, code):
    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert Sample.objects.count() == 0
    return response.json()["detail"]


DEEP = b'{"samples":' + b"[" * 2000 + b"]" * 2000 + b"}"


def test_deeply_nested_body_is_400(post, token):
    assert "JSON" in _refused(post(token, DEEP), 400, "malformed_json")


def test_deeply_nested_body_with_a_bad_token_is_401(post, token):
    _refused(post("vcm_" + "ab" * 16, DEEP), 401, "unauthorized")


def test_deeply_nested_value_is_named_not_echoed(post, token):
    """Deep enough to parse (orjson allows ~1000 levels), too deep to print back."""
    nested = "[" * 1000 + "]" * 1000
    body = orjson.dumps({"samples": [sample()]}).replace(
        b'"cpu_util":31.5', b'"cpu_util":' + nested.encode()
    )
    detail = _refused(post(token, body), 400, "not_a_number")
    assert "samples[0].cpu_util" in detail and len(detail) < 300


def test_a_huge_string_is_not_echoed_whole(post, token):
    detail = _refused(
        post(token, {"samples": [sample(cpu_util="x" * 100_000)]}), 400, "not_a_number"
    )
    assert len(detail) < 300


@pytest.mark.parametrize("vm", [BIGINT_MAX + 1, -(BIGINT_MAX + 2), 10**30])
def test_vm_beyond_bigint_is_400_naming_the_field(post, token, vm):
    body = b'{"vm": %d, "samples": [%s]}' % (vm, orjson.dumps(sample()))
    detail = _refused(post(token, body), 400, "invalid")
    assert "vm" in detail


def test_vm_beyond_bigint_with_a_bad_token_is_401(post, token):
    body = b'{"vm": %d, "samples": [%s]}' % (BIGINT_MAX + 1, orjson.dumps(sample()))
    _refused(post("vcm_" + "cd" * 16, body), 401, "unauthorized")


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("ts", BIGINT_MAX + 1, "in_future"),
        ("ts", 2**64 - 1, "in_future"),
        ("ts", -(2**63), "too_old"),
        ("cpu_util", BIGINT_MAX + 1, "out_of_range"),
        ("net_rx", 2**64 - 1, "out_of_range"),
        ("fabric_tx", -(2**63), "negative"),
    ],
)
@pytest.mark.parametrize("count", [1, 8])  # one prepared INSERT; COPY
def test_huge_integers_in_samples_are_400(post, token, field, value, code, count):
    now = time.time()
    batch = [sample(now - i) for i in range(count)]
    batch[-1][field] = value
    detail = _refused(post(token, {"samples": batch}), 400, code)
    assert f"samples[{count - 1}].{field}" in detail


# ---------------------------------------------------------------------------------------------
# Timestamps are compared at the resolution they are stored at


@pytest.mark.parametrize("count", [2, 8])  # one prepared INSERT; COPY
def test_timestamps_equal_to_the_microsecond_are_duplicates(post, token, count):
    now = int(time.time()) - 30.0
    batch = [sample(now - 10 * i) for i in range(count)]
    batch[-1]["ts"] = batch[0]["ts"] + 0.0000005
    _refused(post(token, {"samples": batch}), 400, "duplicate_ts")


@pytest.mark.parametrize("count", [2, 8])
def test_timestamps_a_microsecond_apart_are_both_stored(post, token, running_vm, count):
    now = int(time.time()) - 30.0
    batch = [sample(now - 10 * i) for i in range(count)]
    batch[-1]["ts"] = now + 0.000001
    response = post(token, {"samples": batch})
    assert response.status_code == 200, response.content
    stored = Sample.objects.filter(vm=running_vm).values_list("ts", flat=True)
    assert datetime.fromtimestamp(now, UTC).replace(microsecond=1) in set(stored)
    assert len(stored) == count


def test_every_path_stores_the_same_instant(post, token, running_vm):
    """The prepared INSERT (a small batch) and COPY (a large one) round alike."""
    base = int(time.time()) - 100.0
    # Fractions whose float value sits close to a half microsecond.
    fractions = [0.0078125, 0.1234565, 0.0000015, 0.9999995]
    small = [sample(base + f) for f in fractions]
    large = [sample(base + 50 + f) for f in fractions] + [sample(base + 60 + i) for i in range(4)]
    assert post(token, {"samples": small}).status_code == 200
    assert post(token, {"samples": large}).status_code == 200
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT ts FROM {Sample._meta.db_table} WHERE vm_id = %s ORDER BY ts",
            [running_vm.pk],
        )
        stored = [row[0] for row in cursor.fetchall()]
    small_micros = [(t - stored[0].replace(microsecond=0)).microseconds for t in stored[:4]]
    large_micros = [(t - stored[4].replace(microsecond=0)).microseconds for t in stored[4:8]]
    assert small_micros == large_micros
