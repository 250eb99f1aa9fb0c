"""POST /api/metrics/ingest: what is stored, and every refusal with nothing stored."""

import gzip
import time

import orjson
import pytest
from django.core.cache import cache

from metrics import services
from metrics.models import METRIC_NAMES, Sample
from tests.metrics.conftest import sample
from vms.models import VmStatus


@pytest.fixture(autouse=True)
def _fresh_rate_window():
    cache.clear()


def test_batch_is_stored_with_its_values(post, token, running_vm):
    now = time.time()
    batch = [sample(now - 20), sample(now - 10, gpu_util=None, gpu_mem_util=None), sample(now)]
    response = post(token, {"samples": batch})
    assert response.status_code == 200, response.content
    assert response.json() == {"stored": 3}
    rows = list(Sample.objects.filter(vm=running_vm).order_by("ts"))
    assert [round(r.ts.timestamp(), 3) for r in rows] == [round(s["ts"], 3) for s in batch]
    assert rows[0].cpu_util == 31.5 and rows[0].fabric_tx == 2.1e10
    assert rows[1].gpu_util is None and rows[1].gpu_mem_util is None


def test_optional_fields_may_be_absent_and_vm_may_be_named(post, token, running_vm):
    bare = sample()
    for name in ("gpu_util", "gpu_mem_util", "fabric_rx", "fabric_tx"):
        del bare[name]
    response = post(token, {"vm": running_vm.pk, "samples": [bare]})
    assert response.status_code == 200, response.content
    assert Sample.objects.get(vm=running_vm).fabric_rx is None


def _refused(response, status, code):
    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert response.json()["detail"]
    assert Sample.objects.count() == 0
    return response.json()["detail"]


@pytest.mark.parametrize(
    "header", [None, "Bearer vcm_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer "]
)
def test_bad_token_is_401(post, token, header):
    headers = {} if header is None else {"Authorization": header}
    response = post(None, {"samples": [sample()]}, **headers)
    _refused(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_rotated_token_no_longer_writes(post, token, running_vm):
    services.rotate_token(running_vm.pk, actor=None)
    _refused(post(token, {"samples": [sample()]}), 401, "unauthorized")


def test_deleted_vm_token_no_longer_writes(post, token, running_vm):
    running_vm.status = VmStatus.DELETED
    running_vm.save()
    _refused(post(token, {"samples": [sample()]}), 401, "unauthorized")


def test_another_vms_id_is_403(post, token, world):
    other = world.vm("someone-else")
    detail = _refused(post(token, {"vm": other.pk, "samples": [sample()]}), 403, "wrong_vm")
    assert "가상머신" in detail


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2", b'{"samples": [{"ts": 1e}]}'])
def test_malformed_json_is_400(post, token, body):
    assert "JSON" in _refused(post(token, body), 400, "malformed_json")


def test_nan_is_400_and_named(post, token):
    body = orjson.dumps({"samples": [sample()]}).replace(b'"cpu_util":31.5', b'"cpu_util":NaN')
    assert "NaN" in _refused(post(token, body), 400, "not_finite")


def test_infinity_is_400(post, token):
    body = orjson.dumps({"samples": [sample()]})
    body = body.replace(b'"net_rx":55000000.0', b'"net_rx":Infinity')
    assert b"Infinity" in body
    assert "Infinity" in _refused(post(token, body), 400, "not_finite")


def test_negative_is_400_naming_sample_and_field(post, token):
    batch = [sample(time.time() - 10), sample(net_tx=-1.0)]
    detail = _refused(post(token, {"samples": batch}), 400, "negative")
    assert "samples[1].net_tx" in detail


@pytest.mark.parametrize(
    ("field", "value"), [("cpu_util", 100.5), ("gpu_mem_util", 1000), ("fabric_rx", 1e13)]
)
def test_out_of_range_is_400(post, token, field, value):
    detail = _refused(post(token, {"samples": [sample(**{field: value})]}), 400, "out_of_range")
    assert f"samples[0].{field}" in detail


def test_future_timestamp_is_400(post, token):
    batch = [sample(), sample(time.time() + 600)]
    assert "samples[1].ts" in _refused(post(token, {"samples": batch}), 400, "in_future")


def test_small_clock_skew_is_accepted(post, token):
    assert post(token, {"samples": [sample(time.time() + 60)]}).status_code == 200


def test_too_old_timestamp_is_400(post, token):
    batch = [sample(time.time() - 8 * 86400)]
    _refused(post(token, {"samples": batch}), 400, "too_old")


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"cpu_util": "31"}, "not_a_number"),
        ({"cpu_util": True}, "not_a_number"),
        ({"mem_util": None}, "not_a_number"),
        ({"ts": "2026-01-01T00:00:00Z"}, "not_a_number"),
        ({"temperature": 40}, "unknown_field"),
    ],
)
def test_wrong_fields_are_400(post, token, bad, code):
    second = {**sample(time.time() - 10), **bad}
    _refused(post(token, {"samples": [sample(), second]}), 400, code)


def test_missing_required_field_is_400(post, token):
    incomplete = sample()
    del incomplete["cpu_util"]
    assert "cpu_util" in _refused(post(token, {"samples": [incomplete]}), 400, "missing_field")


@pytest.mark.parametrize(
    "payload",
    [
        [],
        {"samples": []},
        {"samples": {}},
        {"samples": [1]},
        {"samples": [sample()], "extra": 1},
        {"vm": "1", "samples": []},
    ],
)
def test_wrong_shape_is_400(post, token, payload):
    assert post(token, payload).status_code == 400
    assert Sample.objects.count() == 0


def test_huge_batch_is_413(post, token):
    now = time.time()
    batch = [sample(now - i) for i in range(1001)]
    _refused(post(token, {"samples": batch}), 413, "too_many_samples")


def test_huge_body_is_413(post, token, settings):
    settings.METRICS_MAX_BODY_BYTES = 2000
    batch = [sample(time.time() - i) for i in range(20)]
    _refused(post(token, {"samples": batch}), 413, "too_large")


def test_one_bad_sample_stores_nothing(post, token):
    now = time.time()
    batch = [sample(now - i) for i in range(500)] + [sample(now - 600, gpu_util=-3.0)]
    assert "samples[500].gpu_util" in _refused(post(token, {"samples": batch}), 400, "negative")


def test_duplicate_timestamps_in_batch_are_400(post, token):
    now = time.time()
    _refused(post(token, {"samples": [sample(now), sample(now)]}), 400, "duplicate_ts")


def test_resent_batch_is_409_and_stored_once(post, token):
    now = time.time()
    batch = {"samples": [sample(now - 10), sample(now)]}
    assert post(token, batch).status_code == 200
    response = post(token, batch)
    assert response.status_code == 409 and response.json()["code"] == "duplicate"
    assert Sample.objects.count() == 2


def test_rate_is_bounded_per_token(post, token, settings, world):
    settings.METRICS_RATE_PER_MINUTE = 3
    now = time.time()
    statuses = [post(token, {"samples": [sample(now - i)]}).status_code for i in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    assert int(post(token, {"samples": [sample(now - 9)]})["Retry-After"]) <= 60
    # another VM's token has its own budget
    _vm, other = services.rotate_token(world.vm("other-node").pk, actor=None)
    assert post(other, {"samples": [sample(now)]}).status_code == 200


def test_get_is_not_allowed(client):
    assert client.get("/api/metrics/ingest").status_code == 405


def test_check_names_the_vm(client, token, running_vm):
    response = client.post("/api/metrics/check", headers={"Authorization": f"Bearer {token}"})
    assert response.json() == {"vm": running_vm.pk}
    assert client.post("/api/metrics/check").status_code == 401


def test_gzipped_batch_is_stored(post, token):
    now = time.time()
    body = gzip.compress(orjson.dumps({"samples": [sample(now - i) for i in range(300)]}))
    response = post(token, body, **{"Content-Encoding": "gzip"})
    assert response.status_code == 200, response.content
    assert Sample.objects.count() == 300


def test_broken_gzip_is_400(post, token):
    body = gzip.compress(orjson.dumps({"samples": [sample()]}))
    _refused(post(token, body[:-12], **{"Content-Encoding": "gzip"}), 400, "bad_gzip")
    _refused(post(token, b"not gzip at all", **{"Content-Encoding": "gzip"}), 400, "bad_gzip")


def test_gzip_bomb_is_413(post, token):
    bomb = gzip.compress(b'{"samples": [' + b" " * (3 * 1024 * 1024) + b"]}")
    assert len(bomb) < 10_000
    _refused(post(token, bomb, **{"Content-Encoding": "gzip"}), 413, "too_large")


def test_unknown_encoding_is_415(post, token):
    _refused(post(token, b"{}", **{"Content-Encoding": "br"}), 415, "unsupported_encoding")


FIELDS = ["ts", *METRIC_NAMES]


def compact(*samples, fields=FIELDS):
    return {"fields": fields, "rows": [[s.get(f, 40) for f in fields] for s in samples]}


def test_compact_form_is_stored_like_samples(post, token, running_vm):
    now = time.time()
    response = post(token, compact(sample(now - 10), sample(now, fabric_rx=None)))
    assert response.status_code == 200, response.content
    rows = list(Sample.objects.filter(vm=running_vm).order_by("ts"))
    assert [r.fabric_rx for r in rows] == [2.0e10, None]


def test_compact_form_may_leave_out_optional_fields(post, token, running_vm):
    fields = ["ts", "cpu_util", "mem_util", "net_rx", "net_tx"]
    assert post(token, compact(sample(), fields=fields)).status_code == 200
    assert Sample.objects.get(vm=running_vm).gpu_util is None


@pytest.mark.parametrize(
    ("payload", "code", "words"),
    [
        (compact(sample(), fields=[*FIELDS[:-1], "temperature"]), "unknown_field", "temperature"),
        (compact(sample(), fields=FIELDS[1:]), "missing_field", "ts"),
        ({"fields": FIELDS, "rows": [[1, 2]]}, "invalid", "rows[0]"),
        ({"fields": FIELDS, "rows": [{}]}, "invalid", "rows[0]"),
        ({"fields": [*FIELDS, "ts"], "rows": [[0] * 10]}, "invalid", "fields"),
        ({"fields": "ts", "rows": [[0]]}, "invalid", "fields"),
        ({**compact(sample()), "samples": [sample()]}, "invalid", "rows"),
    ],
)
def test_compact_form_refusals(post, token, payload, code, words):
    assert words in _refused(post(token, payload), 400, code)


def test_compact_form_names_the_row(post, token):
    now = time.time()
    detail = _refused(
        post(token, compact(sample(now - 1), sample(now, mem_util=-5))), 400, "negative"
    )
    assert "rows[1].mem_util" in detail


def test_rotating_a_token_is_404_for_a_vm_the_user_cannot_read_and_403_for_a_reader(world):
    from metrics.models import MetricsToken
    from portal.foundation.errors import PermissionRequired, VmNotFound

    vm = world.vm("rotate-me")
    with pytest.raises(VmNotFound):
        services.rotate_token(vm.pk, actor=world.users["other"])
    with pytest.raises(PermissionRequired):
        services.rotate_token(vm.pk, actor=world.users["viewer"])
    assert not MetricsToken.objects.filter(vm=vm).exists()
    assert services.rotate_token(vm.pk, actor=world.users["operator"])[0] == vm
