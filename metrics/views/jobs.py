"""The agents' job endpoints for 클러스터 검증: the agent polls for work with its
metrics token, as it posts samples; the portal never connects to a VM.

``POST /api/metrics/jobs/next`` → ``{"jobs": [{"id", "kind", "params", "timeout"}]}``: the
jobs of the token's VM that may run now, each handed out once. ``POST
/api/metrics/jobs/result`` with ``{"job": id, "outputs": [{"tool", "stdout", "exit_code", …}],
"seconds"}`` → ``{"status"}``. Refusals are problem documents (``metrics.views.agent``):
401 bad token, 400 malformed, 404 not this VM's job, 409 already finished (or timed out),
413 too large, 429 more than ``METRICS_JOBS_RATE_PER_MINUTE`` requests of the token's in the
minute since its first (both endpoints counted together, apart from ingest's).
"""

from django.http import JsonResponse
from django.utils.translation import gettext as _

from clusters.validation import jobs
from metrics import agent_versions, conf, errors, liveness
from metrics.ingest import batch as ingest
from metrics.views.agent import agent_endpoint, refused
from portal.iam.throttle import Counter

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
    agent_versions.note(token_hash, request)
    liveness.contact(token_hash)
    return vm_id


@agent_endpoint
def next_jobs(request):
    claimed = jobs.claim(authenticate(request))
    return JsonResponse(
        {
            "jobs": [
                {"id": j.pk, "kind": j.kind, "params": j.params, "timeout": j.timeout_seconds}
                for j in claimed
            ]
        }
    )


# A ``JobRefused``'s code by its status (documented in ``metrics.openapi``).
JOB_REFUSALS = {400: "invalid", 404: "not_found", 409: "finished"}


@agent_endpoint
def job_result(request):
    vm_id = authenticate(request)
    payload = ingest.parse(ingest.read_body(request))
    try:
        job = jobs.record(vm_id, payload)
    except jobs.JobRefused as refusal:
        return refused(refusal.status, JOB_REFUSALS[refusal.status], refusal.detail)
    return JsonResponse({"status": job.status})
