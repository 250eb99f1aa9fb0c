"""The agents' endpoints answer refusals as the REST API does (RFC 9457 problem+json, the
same members, the caller's language), and an OpenAPI 3.1 document describes all four:
valid, naming every route, with the REST API's Problem schema; every answer below (and every
answer of the ingest tests, through the ``post`` fixture) matches it."""

import gzip

import orjson
import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import translation
from openapi_spec_validator import validate

from metrics import errors, openapi
from metrics.urls import urlpatterns
from metrics.views.jobs import JOB_REFUSALS
from portal.api.schemas import Problem
from portal.foundation.errors import RuleViolation
from tests.metrics.conftest import check_agent_answer, sample

pytestmark = pytest.mark.django_db
PROBLEM_MEMBERS = {"type", "title", "status", "code", "detail"}
ENDPOINTS = {
    "/api/metrics/ingest": "metrics:ingest",
    "/api/metrics/check": "metrics:ingest_check",
    "/api/metrics/jobs/next": "metrics:ingest_jobs_next",
    "/api/metrics/jobs/result": "metrics:ingest_job_result",
    "/api/metrics/host-keys": "metrics:ingest_host_keys",
}
# Read with GET (tests/metrics/test_cluster_view.py holds its answers to the document).
READ_ENDPOINTS = {"/api/metrics/cluster": "metrics:ingest_cluster"}


@pytest.fixture(autouse=True)
def fresh_rate_windows():
    cache.clear()


def call(client, path, body=b"{}", token=None, **headers):
    """POST to an agents' endpoint; the answer is checked against the document."""
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    response = client.generic(
        "POST", reverse(ENDPOINTS[path]), body, content_type="application/json", headers=headers
    )
    check_agent_answer(path, response)
    return response


def assert_problem(response, status, code):
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert PROBLEM_MEMBERS <= set(body) and body["type"] == "about:blank"
    assert body["status"] == status and body["code"] == code and body["detail"]
    return body


def test_a_refusal_has_the_members_of_the_rest_apis(client, token):
    rest = client.get("/api/v1/virtual-machines")  # no token: the REST API's own problem
    agents = call(client, "/api/metrics/ingest", token="vcm_" + "x" * 40)
    assert rest["Content-Type"] == agents["Content-Type"] == "application/problem+json"
    assert set(rest.json()) == set(agents.json()) == PROBLEM_MEMBERS
    body = assert_problem(agents, 401, "unauthorized")
    assert body["title"] == "Unauthorized"
    assert agents["WWW-Authenticate"] == 'Bearer realm="metrics"'


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_every_endpoint_refuses_a_missing_token_as_a_problem(client, path):
    assert_problem(call(client, path), 401, "unauthorized")


def test_the_detail_is_in_the_language_asked_for(client, token):
    korean = call(client, "/api/metrics/check").json()["detail"]
    english = call(client, "/api/metrics/check", **{"Accept-Language": "en"}).json()["detail"]
    assert korean == "Bearer 토큰이 필요합니다."
    with translation.override("en"):
        assert english == translation.gettext("Bearer 토큰이 필요합니다.") != korean
    # A message built when raised, with the request's figures, is in that language too.
    body = orjson.dumps({"samples": [sample(), sample(cpu_util=-1.0)]})
    refused = call(client, "/api/metrics/ingest", body, token=token, **{"Accept-Language": "en"})
    detail = assert_problem(refused, 400, "negative")["detail"]
    assert "samples[1].cpu_util" in detail and detail.isascii()


def test_ingest_refusals_are_problems_with_their_codes(client, token, settings):
    assert_problem(call(client, "/api/metrics/ingest", b"[", token=token), 400, "malformed_json")
    body = orjson.dumps({"samples": [sample(cpu_util=-1.0)]})
    problem = assert_problem(
        call(client, "/api/metrics/ingest", body, token=token), 400, "negative"
    )
    assert "samples[0].cpu_util" in problem["detail"]
    assert_problem(
        call(client, "/api/metrics/ingest", body, token=token, **{"Content-Encoding": "br"}),
        415,
        "unsupported_encoding",
    )
    ok = orjson.dumps({"samples": [sample(ts=1_700_000_000 + 0.5)]})
    assert call(client, "/api/metrics/ingest", ok, token=token).status_code == 400  # too old
    fresh = orjson.dumps({"samples": [sample()]})
    gzipped = {"Content-Encoding": "gzip"}
    stored = call(client, "/api/metrics/ingest", gzip.compress(fresh), token=token, **gzipped)
    assert stored.status_code == 200 and stored.json() == {"stored": 1}
    assert_problem(call(client, "/api/metrics/ingest", fresh, token=token), 409, "duplicate")
    settings.METRICS_RATE_PER_MINUTE = 1  # the window is open: the next request is over
    limited = call(client, "/api/metrics/ingest", fresh, token=token)
    assert_problem(limited, 429, "rate_limited")
    assert limited["Retry-After"] == "60"


def test_the_job_endpoints_refusals_are_problems(client, token, running_vm):
    assert call(client, "/api/metrics/jobs/next", token=token).json() == {"jobs": []}
    result = orjson.dumps({"job": 2**40, "outputs": [{"tool": "ports", "exit_code": 0}]})
    assert_problem(call(client, "/api/metrics/jobs/result", result, token=token), 404, "not_found")
    assert_problem(call(client, "/api/metrics/jobs/result", b"[]", token=token), 400, "invalid")
    assert_problem(
        call(client, "/api/metrics/jobs/result", b"{", token=token), 400, "malformed_json"
    )
    assert call(client, "/api/metrics/check", token=token).json() == {"vm": running_vm.pk}


def test_a_wrong_method_is_a_problem_too(client):
    response = client.get(reverse("metrics:ingest"))
    assert_problem(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST"


# ---------------------------------------------------------------------------------------------
# The document


def test_the_document_is_valid_openapi_3_1_and_names_every_agent_route(client):
    response = client.get("/api/metrics/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    validate(document)
    routes = {
        "/" + str(p.pattern)
        for p in urlpatterns
        if str(p.pattern).startswith("api/metrics/") and p.name != "agent_openapi"
    }
    assert set(document["paths"]) == routes == set(ENDPOINTS) | set(READ_ENDPOINTS)
    assert all(list(document["paths"][path]) == ["post"] for path in ENDPOINTS)
    assert all(list(document["paths"][path]) == ["get"] for path in READ_ENDPOINTS)
    assert document["components"]["securitySchemes"]["MetricsToken"]["scheme"] == "bearer"
    assert document["security"] == [{"MetricsToken": []}]


def test_its_problem_is_the_rest_apis_and_every_refusal_is_one(client):
    document = client.get("/api/metrics/openapi.json").json()
    assert document["components"]["schemas"]["Problem"] == Problem.model_json_schema()
    known = set(RuleViolation.registry) | set(JOB_REFUSALS.values())
    for path, item in document["paths"].items():
        (operation,) = item.values()
        for status, answer in operation["responses"].items():
            if int(status) < 400:
                continue
            assert list(answer["content"]) == ["application/problem+json"], (path, status)
            codes = answer["description"].split(": ", 1)[1].split(", ")
            assert set(codes) <= known, (path, status, set(codes) - known)


def test_it_names_every_ingest_refusal_and_the_limits_in_force(settings):
    settings.METRICS_MAX_BATCH_SAMPLES = 17
    document = openapi.document()
    answers = document["paths"]["/api/metrics/ingest"]["post"]["responses"]
    described = " ".join(answer["description"] for answer in answers.values())
    stack = [errors.IngestError]
    while stack:
        cls = stack.pop()
        if cls not in openapi.NOT_INGEST:  # another endpoint's own refusal
            assert cls.code in answers[str(cls.status)]["description"], cls
        stack.extend(cls.__subclasses__())
    assert "body_too_large" in described and "method_not_allowed" in described
    samples = document["components"]["schemas"]["Samples"]["properties"]["samples"]
    assert samples["maxItems"] == 17
