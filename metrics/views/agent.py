"""The agents' ingest endpoints: a bearer metrics token, never a session or CSRF."""

import time

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from metrics import errors, ingest


def _refusal(error: errors.IngestError) -> JsonResponse:
    response = JsonResponse(
        {"error": error.code, "detail": str(error.message)}, status=error.status
    )
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    if error.status == 429:
        # A window opens at the token's first request: it has closed a window's length on.
        response["Retry-After"] = str(ingest.RATE_WINDOW_SECONDS)
    return response


@csrf_exempt  # agents authenticate with a bearer token, never a cookie: CSRF cannot apply
@require_POST
def ingest_samples(request):
    """Store one batch for the token's VM: 200 ``{"stored": n}`` or 4xx ``{"error", "detail"}``.

    401 bad token, 403 another VM's id, 413 too big, 429 over the rate, 409 already stored,
    400 anything malformed, naming the first offending sample and field. All or nothing.
    """
    now = time.time()
    try:
        token_hash = ingest.bearer_hash(request)
        try:
            claimed_vm, columns, devices = ingest.validate(
                ingest.parse(ingest.read_body(request)), now
            )
        except errors.IngestError:
            ingest.lookup(token_hash)  # a bad token is a 401 whatever the body
            raise
        counted = ingest.check_rate(token_hash)
        ingest.store(token_hash, claimed_vm, columns, now, counted, devices)
    except errors.IngestError as error:
        return _refusal(error)
    return JsonResponse({"stored": len(columns[0])})


@csrf_exempt
@require_POST
def ingest_check(request):
    """Which VM this token writes for (``vc-metrics-agent --check``); nothing is stored."""
    try:
        vm_id = ingest.authenticate(request)
    except errors.IngestError as error:
        return _refusal(error)
    return JsonResponse({"vm": vm_id})
