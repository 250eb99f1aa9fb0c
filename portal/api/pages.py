"""The console's API 토큰 page (user menu): create (the secret is shown once), list, revoke.

A session page like any other: a user manages only their own tokens, for projects where
they hold a role.
"""

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from portal.api.guard import nul_as_form_error
from portal.foundation.errors import InvalidInput
from portal.iam import tokens
from portal.models import ApiToken


def _context(request, **extra) -> dict:
    return {
        "tokens": ApiToken.objects.filter(user=request.user).select_related("project"),
        "projects": list(tokens.token_projects(request.user)),
        "default_days": ApiToken.DEFAULT_DAYS,
        "max_days": ApiToken.MAX_DAYS,
        "api_url": request.build_absolute_uri("/api/v1/"),
        **extra,
    }


@nul_as_form_error
@never_cache  # the POST answer holds the secret: never stored by a cache
@login_required
@require_http_methods(["GET", "POST"])
def token_list(request):
    if request.method == "GET":
        return render(request, "portal/api_tokens.html", _context(request))
    try:
        if getattr(request, "input_refusal", None) is not None:
            raise request.input_refusal
        token, secret = tokens.issue_token(
            user=request.user,
            project_id=request.POST.get("project"),
            name=request.POST.get("name"),
            days=request.POST.get("days") or ApiToken.DEFAULT_DAYS,
        )
    except InvalidInput as exc:
        context = _context(request, error=exc.message, error_field=exc.field, form=request.POST)
        return render(request, "portal/api_tokens.html", context, status=exc.status)
    return render(request, "portal/api_tokens.html", _context(request, issued=token, secret=secret))


@login_required
@require_POST
def token_revoke(request, pk):
    tokens.revoke_token(pk, user=request.user)
    return redirect("api_tokens")
