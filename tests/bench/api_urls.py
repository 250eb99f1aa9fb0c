"""bench_api's URLconf: the portal's, plus the API floor (a trivial view behind the token)
and bench_pages' session floor (bench_fleet_pages divides by both)."""

from django.http import HttpResponse
from django.urls import include, path

from portal.foundation.errors import RuleViolation
from portal.iam import tokens
from tests.bench.urls import floor_view


def api_floor_view(request):
    """The minimal token-authenticated view: the same middleware and the same token check
    (one query, the rate counter) as every API call, then "ok"."""
    try:
        tokens.authenticate(request)
    except RuleViolation as refusal:
        return HttpResponse(refusal.message, status=refusal.status)
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [
    path("__bench__/api-floor/", api_floor_view),
    path("__bench__/floor/", floor_view),
    path("", include("portal.urls")),
]
