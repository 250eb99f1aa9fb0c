"""bench_pages' URLconf: the portal's, plus the floor every page is divided by."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import include, path


@login_required
def floor_view(request):
    """The minimal authenticated view: the same middleware, nothing else."""
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("__bench__/floor/", floor_view), path("", include("portal.urls"))]
