"""The console's pages beside the API (user menu): API 토큰 — create (the secret is shown
once), list, revoke — and SSH 키, the current project's public keys — register, list,
delete.

Session pages like any other: a user manages only their own tokens, for projects where
they hold a role; the keys are the project's, read and changed under its role
(``Resource.SshKey.*``), another project's key a 404.
"""

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from portal.api.guard import nul_as_form_error
from portal.foundation.errors import InvalidInput
from portal.foundation.errors.ssh_keys import MAX_KEY_BYTES
from portal.iam import ssh_keys, tokens
from portal.iam.permissions import Perm
from portal.models import ApiToken, SshKey


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


def _keys_context(request, **extra) -> dict:
    project, user = request.project, request.user
    keys = SshKey.objects.restrict(user, Perm.SSH_KEY_READ).filter(project=project)
    return {
        "keys": keys.select_related("created_by") if project is not None else [],
        "can_create": project is not None and user.has_perm(Perm.SSH_KEY_CREATE, project),
        "can_delete": project is not None and user.has_perm(Perm.SSH_KEY_DELETE, project),
        "max_bytes": MAX_KEY_BYTES,
        **extra,
    }


@nul_as_form_error
@login_required
@require_http_methods(["GET", "POST"])
def ssh_key_list(request):
    """The current project's keys; a POST registers one there (the service checks
    ``Resource.SshKey.CREATE`` and audits, whatever the form says)."""
    if request.method == "GET":
        return render(request, "portal/ssh_keys.html", _keys_context(request))
    if request.project is None:
        return redirect("ssh_keys")
    try:
        if getattr(request, "input_refusal", None) is not None:
            raise request.input_refusal
        key = ssh_keys.create_ssh_key(
            actor=request.user,
            project=request.project,
            name=request.POST.get("name"),
            public_key=request.POST.get("public_key"),
        )
    except InvalidInput as exc:
        context = _keys_context(
            request, error=exc.message, error_field=exc.field, form=request.POST
        )
        return render(request, "portal/ssh_keys.html", context, status=exc.status)
    return render(request, "portal/ssh_keys.html", _keys_context(request, added=key))


@login_required
@require_POST
def ssh_key_delete(request, pk):
    ssh_keys.delete_ssh_key(pk, actor=request.user)
    return redirect("ssh_keys")
