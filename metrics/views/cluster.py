"""The agents' view of their cluster and their report of the guest's SSH host keys, with the
metrics token as every agents' endpoint (``metrics.views.agent``); counted in the job
endpoints' window (``METRICS_JOBS_RATE_PER_MINUTE``).

``GET /api/metrics/cluster`` → the member's view (``clusters.peers.member_view``) with an
``ETag`` of its version; ``If-None-Match`` with it answers 304, so an agent polling an
unchanged cluster gets no body. 404 ``no_cluster`` when the VM is in no cluster. The answer
may carry the cluster's private key: it is never cached (``no-store``) and never logged.

``POST /api/metrics/host-keys`` with ``{"host_keys": ["ssh-ed25519 AAAA… [comment]", …]}``
→ ``{"changed": bool}``: the guest's host keys, replaced whole (``vms.host_keys``).
"""

from django.http import HttpResponse, JsonResponse
from django.utils.translation import gettext as _

from clusters import peers
from metrics import errors
from metrics.ingest import batch as ingest
from metrics.views.agent import agent_endpoint, agent_reader
from metrics.views.jobs import authenticate
from metrics.vm_agent.hostkeys import HostKeyError
from vms import host_keys


def _quoted(version: str) -> str:
    return f'"{version}"'


@agent_reader
def cluster_view(request):
    view = peers.member_view(authenticate(request))
    if view is None:
        raise errors.NotInCluster()
    etag = _quoted(view["version"])
    asked = {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}
    response = HttpResponse(status=304) if etag in asked else JsonResponse(view)
    response["ETag"] = etag
    response["Cache-Control"] = "no-store"
    return response


@agent_endpoint
def report_host_keys(request):
    vm_id = authenticate(request)
    payload = ingest.parse(ingest.read_body(request))
    if not isinstance(payload, dict) or set(payload) != {"host_keys"}:
        raise errors.Invalid(_("본문은 host_keys 목록 하나만 담은 JSON 객체여야 합니다."))
    try:
        keys = host_keys.parsed_keys(payload["host_keys"])
    except HostKeyError as exc:
        raise errors.Invalid(str(exc)) from exc
    return JsonResponse({"changed": host_keys.replace_host_keys(vm_id, keys)})
