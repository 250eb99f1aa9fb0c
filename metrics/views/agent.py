"""The agents' endpoints: a bearer metrics token, never a session or CSRF.

A refusal is an RFC 9457 problem document, as the REST API answers
(``portal.foundation.problems``): ``application/problem+json`` with ``type``, ``title``, ``status``,
a stable ``code`` (``metrics.errors``) and ``detail``, in the language of Accept-Language
(Korean by default). ``GET /api/metrics/openapi.json`` describes them (``metrics.openapi``).
Each endpoint keeps the version the agent reports in its User-Agent
(``metrics.agent_versions``).
"""

import functools
import time

from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from metrics import agent_versions, errors, liveness, openapi
from metrics.ingest import batch as ingest
from portal.foundation.problems import PROBLEM_TYPE, activate_api_language, problem, problem_body


def problem_response(body: dict) -> HttpResponse:
    response = JsonResponse(body, status=body["status"], json_dumps_params={"ensure_ascii": False})
    response["Content-Type"] = PROBLEM_TYPE
    return response


def refusal(error: errors.IngestError) -> HttpResponse:
    response = problem_response(problem_body(error))
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    if error.status == 429:
        # A window opens at the token's first request: it has closed a window's length on.
        response["Retry-After"] = str(ingest.RATE_WINDOW_SECONDS)
    return response


def refused(status: int, code: str, detail: str) -> HttpResponse:
    """A refusal that is not a typed error (the job endpoints' ``JobRefused``)."""
    return problem_response(problem(status, code, detail))


def agent_endpoint(view, method="POST"):
    """An agents' endpoint: POST only (or ``method``), no CSRF (a bearer token, never a
    cookie), messages in the language of Accept-Language, and an ``IngestError`` answered as
    a problem."""

    @csrf_exempt
    @require_http_methods([method])
    @functools.wraps(view)
    def endpoint(request):
        activate_api_language(request)
        try:
            return view(request)
        except errors.IngestError as error:
            return refusal(error)

    return endpoint


def agent_reader(view):
    """An agents' endpoint that only reads: GET, otherwise as ``agent_endpoint``."""
    return agent_endpoint(view, method="GET")


@agent_endpoint
def ingest_samples(request):
    """Store one batch for the token's VM: 200 ``{"stored": n}`` or a problem.

    401 bad token, 403 another VM's id, 413 too big, 429 over the rate, 409 already stored,
    400 anything malformed, naming the first offending sample and field. All or nothing.
    """
    now = time.time()
    token_hash = ingest.bearer_hash(request)
    try:
        claimed_vm, columns, devices = ingest.validate(ingest.parse(ingest.read_body(request)), now)
    except errors.IngestError:
        ingest.lookup(token_hash)  # a bad token is a 401 whatever the body
        raise
    counted = ingest.check_rate(token_hash)
    noted = ingest.store(token_hash, claimed_vm, columns, now, counted, devices)
    agent_versions.note(token_hash, request)
    if not noted:
        liveness.contact(token_hash)
    return JsonResponse({"stored": len(columns[0])})


@agent_endpoint
def ingest_check(request):
    """Which VM this token writes for (``vc-metrics-agent --check``); nothing is stored."""
    token_hash = ingest.bearer_hash(request)
    vm_id = ingest.lookup(token_hash)
    agent_versions.note(token_hash, request)
    liveness.contact(token_hash)
    return JsonResponse({"vm": vm_id})


@require_GET
@cache_control(max_age=3600, public=True)
def agent_openapi(request):
    """The OpenAPI 3.1 document of the agents' endpoints (no token needed to read it)."""
    return JsonResponse(openapi.document(), json_dumps_params={"ensure_ascii": False})
