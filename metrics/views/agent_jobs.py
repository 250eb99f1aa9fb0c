"""The agents' job endpoints for 클러스터 검증: the agent polls for work with its
metrics token, as it posts samples; the portal never connects to a VM.

``POST /api/metrics/jobs/next`` → ``{"jobs": [{"id", "kind", "params", "timeout"}]}``: the
jobs of the token's VM that may run now, each handed out once. ``POST
/api/metrics/jobs/result`` with ``{"job": id, "outputs": [{"tool", "stdout", "exit_code", …}],
"seconds"}`` → ``{"status"}``. Refusals are ``{"error", "detail"}``: 401 bad token, 400
malformed, 404 not this VM's job, 409 already finished (or timed out), 413 too large, 429
more than ``METRICS_JOBS_RATE_PER_MINUTE`` requests of the token's in the minute since its
first (both endpoints counted together, apart from ingest's).
"""

from django.http import JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from clusters.validation import jobs
from metrics import conf, errors, ingest
from metrics.views.agent import _refusal
from portal.throttle import Counter

RATE = Counter("metrics-jobs-rate")


def authenticate(request) -> int:
    """The VM id of the request's bearer token, counted against the token's window as
    ingest counts (``ingest.check_rate``): ``RateLimited`` past the limit, and a window
    opened only once the token is verified, so made-up tokens never take a cache entry."""
    token_hash = ingest.bearer_hash(request)
    key = token_hash[:32]
    limit = conf.get("METRICS_JOBS_RATE_PER_MINUTE")
    count = RATE.hit_open(key)
    if count > limit:
        raise errors.RateLimited(
            _("요청이 너무 많습니다. 분당 %(limit)d회까지 보낼 수 있습니다.") % {"limit": limit}
        )
    vm_id = ingest.lookup(token_hash)
    if not count:
        RATE.open(key, ingest.RATE_WINDOW_SECONDS)
    return vm_id


@csrf_exempt  # bearer token, never a cookie
@require_POST
def next_jobs(request):
    try:
        vm_id = authenticate(request)
    except errors.IngestError as error:
        return _refusal(error)
    claimed = jobs.claim(vm_id)
    return JsonResponse(
        {
            "jobs": [
                {"id": j.pk, "kind": j.kind, "params": j.params, "timeout": j.timeout_seconds}
                for j in claimed
            ]
        }
    )


@csrf_exempt
@require_POST
def job_result(request):
    try:
        vm_id = authenticate(request)
        payload = ingest.parse(ingest.read_body(request))
    except errors.IngestError as error:
        return _refusal(error)
    try:
        job = jobs.record(vm_id, payload)
    except jobs.JobRefused as refused:
        code = {400: "invalid", 404: "not_found", 409: "finished"}[refused.status]
        return JsonResponse({"error": code, "detail": refused.detail}, status=refused.status)
    return JsonResponse({"status": job.status})
