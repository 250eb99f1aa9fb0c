"""The agents' job endpoints for 클러스터 검증 (issue 14): the agent polls for work with its
metrics token, as it posts samples; the portal never connects to a VM.

``POST /api/metrics/jobs/next`` → ``{"jobs": [{"id", "kind", "params", "timeout"}]}``: the
jobs of the token's VM that may run now, each handed out once. ``POST
/api/metrics/jobs/result`` with ``{"job": id, "outputs": [{"tool", "stdout", "exit_code", …}],
"seconds"}`` → ``{"status"}``. Refusals are ``{"error", "detail"}``: 401 bad token, 400
malformed, 404 not this VM's job, 409 already finished (or timed out), 413 too large.
"""

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from clusters.validation import jobs
from metrics import errors, ingest
from metrics.views import _refusal


@csrf_exempt  # bearer token, never a cookie
@require_POST
def next_jobs(request):
    try:
        vm_id = ingest.authenticate(request)
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
        vm_id = ingest.authenticate(request)
        payload = ingest.parse(ingest.read_body(request))
    except errors.IngestError as error:
        return _refusal(error)
    try:
        job = jobs.record(vm_id, payload)
    except jobs.JobRefused as refused:
        code = {400: "invalid", 404: "not_found", 409: "finished"}[refused.status]
        return JsonResponse({"error": code, "detail": refused.detail}, status=refused.status)
    return JsonResponse({"status": job.status})
