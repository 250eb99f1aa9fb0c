"""bench_api's URLconf: the portal's, plus the API floor (a trivial view behind the token)."""

from django.http import HttpResponse
from django.urls import include, path

from portal.foundation.errors import RuleViolation
from portal.iam import tokens


def api_floor_view(request):
    """The minimal token-authenticated view: the same middleware and the same token check
    (one query, the rate counter) as every API call, then "ok"."""
    try:
        tokens.authenticate(request)
    except RuleViolation as refusal:
        return HttpResponse(refusal.message, status=refusal.status)
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("__bench__/api-floor/", api_floor_view), path("", include("portal.urls"))]
