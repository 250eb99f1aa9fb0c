"""``GET /metrics/federate/``: a project's series for its own Prometheus.

The scraper authenticates with a bearer token; which project a token reads is decided by one
function, ``METRICS_SCRAPE_AUTH`` (a dotted path), so that the portal's API tokens can take
over without touching the view. Until then the default reads ``METRICS_SCRAPE_TOKENS``:
comma-separated ``<project slug>=<SHA-256 hex of the token>`` pairs (only hashes in the
configuration, as the agents' tokens are kept).
"""

import hashlib
import hmac

from django.http import HttpResponse
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from clusters.models import ClusterStatus, VirtualCluster
from metrics import conf, errors
from metrics.storage import exposition
from portal.models import Project
from vms.models import VirtualMachine, VmStatus


def enabled() -> bool:
    """Whether scraping is configured at all (the URL is routed only then)."""
    return bool(conf.get("METRICS_SCRAPE_TOKENS")) or (
        conf.get("METRICS_SCRAPE_AUTH") != conf.DEFAULTS["METRICS_SCRAPE_AUTH"]
    )


class ScrapeRefused(Exception):
    """No project for this request's credentials."""


def token_from_settings(request) -> Project:
    """The project whose ``METRICS_SCRAPE_TOKENS`` hash matches the bearer token."""
    scheme, _sep, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        raise ScrapeRefused()
    digest = hashlib.sha256(token.encode()).hexdigest()
    for pair in conf.get("METRICS_SCRAPE_TOKENS").split(","):
        slug, _sep, expected = pair.strip().partition("=")
        if expected and hmac.compare_digest(expected.strip().lower(), digest):
            project = Project.objects.filter(slug=slug.strip()).first()
            if project is not None:
                return project
    raise ScrapeRefused()


def scrape_project(request) -> Project:
    """The project this scrape may read, by the configured function (``ScrapeRefused``)."""
    return import_string(conf.get("METRICS_SCRAPE_AUTH"))(request)


def members_of(project, cluster_id=None) -> list:
    """[(vm_id, vm name, cluster name, health)] of the project's clusters' live members."""
    clusters = VirtualCluster.objects.filter(project=project).exclude(status=ClusterStatus.DELETED)
    if cluster_id is not None:
        clusters = clusters.filter(pk=cluster_id)
    return list(
        VirtualMachine.objects.filter(cluster__in=clusters)
        .exclude(status=VmStatus.DELETED)
        .order_by("cluster__name", "name", "pk")
        .values_list("pk", "name", "cluster__name", "health")
    )


@require_GET
def federate(request):
    """The project's latest samples in Prometheus' text format; ``?cluster=<id>`` narrows it
    to one cluster. 401 without a valid token, 400 for a malformed cluster id."""
    try:
        project = scrape_project(request)
    except ScrapeRefused:
        response = HttpResponse(
            str(errors.Unauthorized().message), status=401, content_type="text/plain; charset=utf-8"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics-federate"'
        return response
    raw = request.GET.get("cluster")
    if raw is not None and not (raw.isascii() and raw.isdigit() and len(raw) < 19):
        return HttpResponse(
            _("cluster는 클러스터 ID(정수)여야 합니다."),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    members = members_of(project, None if raw is None else int(raw))
    return HttpResponse(exposition.render(members), content_type=exposition.CONTENT_TYPE)
