"""Personal access tokens: issue (shown once), revoke, and who a bearer token acts as.

A token acts as its user narrowed to the token's project, with the role the user holds
there *now* (read on every request, in the same query that finds the token): never the
superuser bypass, never another project, nothing once the role or the token is gone.
"""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import JSONField, OuterRef, Subquery
from django.utils import timezone

from portal.foundation.audit import attempt
from portal.foundation.errors import NotFound
from portal.foundation.errors.api import (
    RateLimited,
    TokenDaysInvalid,
    TokenExpired,
    TokenInvalid,
    TokenLimitReached,
    TokenNameRequired,
    TokenProjectInvalid,
    TokenRequired,
    TokenRevoked,
    TokenRoleGone,
)
from portal.foundation.kernel import parse_id
from portal.iam.throttle import Counter
from portal.models import ApiToken, Project, RoleBinding

API_RATE = Counter("api-rate")
API_RATE_WINDOW_SECONDS = 60

# Writing last_used_at on every request would make each read a write: once a minute is
# what "last used" needs.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_projects(user):
    """The projects a user may issue a token for: where they hold a role (a superuser too:
    the token acts with the role, never with the superuser bypass)."""
    return Project.objects.filter(bindings__user=user).order_by("name")


def issue_token(*, user, project_id, name, days=ApiToken.DEFAULT_DAYS) -> tuple[ApiToken, str]:
    """A new token of ``user`` for a project they hold a role in, and its secret (shown
    once, never stored); refused past ``ApiToken.MAX_ACTIVE_PER_USER`` active tokens (the
    user's row is locked while counting, so concurrent issues cannot pass it together).
    Audited like every other change."""
    with attempt("token.create", actor=user, target_type="api_token") as att:
        name = str(name or "").strip()
        att.target_name = name[:100]
        if not 0 < len(name) <= 100:
            raise TokenNameRequired()
        try:
            days = int(days)
        except (TypeError, ValueError):
            days = 0
        if not 0 < days <= ApiToken.MAX_DAYS:
            raise TokenDaysInvalid(max=ApiToken.MAX_DAYS)
        project = token_projects(user).filter(pk=parse_id(project_id)).first()
        if project is None:
            raise TokenProjectInvalid()
        att.project_id = project.pk
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        active = ApiToken.objects.filter(
            user=user, revoked_at__isnull=True, expires_at__gt=timezone.now()
        )
        if active.count() >= ApiToken.MAX_ACTIVE_PER_USER:
            raise TokenLimitReached(max=ApiToken.MAX_ACTIVE_PER_USER)
        secret = ApiToken.PREFIX + secrets.token_urlsafe(32)
        token = ApiToken.objects.create(
            user=user,
            project=project,
            name=name,
            token_hash=hash_token(secret),
            prefix=secret[:12],
            expires_at=timezone.now() + timedelta(days=days),
        )
        att.target_id = token.pk
    return token, secret


def revoke_token(token_id, *, user) -> ApiToken:
    """Revoke one of ``user``'s own tokens (another's is a 404); it stops working at once."""
    with attempt("token.revoke", actor=user, target_type="api_token") as att:
        token = (
            ApiToken.objects.select_for_update()
            .filter(user=user, pk=parse_id(token_id) or 0)  # 0: no token has it
            .first()
        )
        if token is None:
            raise NotFound()
        att.target_id, att.target_name, att.project_id = token.pk, token.name, token.project_id
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
    return token


def revoke_tokens(tokens, *, actor) -> int:
    """An operator's revoke (the admin's action, on the tokens it may see): every token of
    ``tokens`` not revoked yet stops working at once, each one audited; returns how many."""
    revoked = 0
    for token_id in tokens.filter(revoked_at__isnull=True).values_list("pk", flat=True):
        with transaction.atomic():
            token = (
                ApiToken.objects.select_for_update()
                .filter(pk=token_id, revoked_at__isnull=True)
                .first()
            )
            if token is None:  # revoked meanwhile: nothing to do, nothing to record
                continue
            with attempt("token.revoke", actor=actor, target_type="api_token") as att:
                att.target_id, att.target_name = token.pk, token.name
                att.project_id = token.project_id
                token.revoked_at = timezone.now()
                token.save(update_fields=["revoked_at"])
            revoked += 1
    return revoked


def bearer_secret(request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _sep, secret = header.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise TokenRequired()
    if not secret.startswith(ApiToken.PREFIX) or len(secret) > 100 or not secret.isascii():
        raise TokenInvalid()
    return secret


# The permissions of the token user's role in the token's project (built once).
ROLE_PERMISSIONS = Subquery(
    RoleBinding.objects.filter(
        user_id=OuterRef("user_id"), project_id=OuterRef("project_id")
    ).values("role__permissions")[:1],
    output_field=JSONField(),
)


def authenticate(request):
    """The user a request's bearer token acts as, narrowed to the token's project, with the
    token on ``user.api_token``; else the 401 that says why.

    One query finds the token, its user and the user's role in the token's project.
    """
    secret = bearer_secret(request)
    token = (
        ApiToken.objects.select_related("user", "project")
        .annotate(permissions=ROLE_PERMISSIONS)
        .filter(token_hash=hash_token(secret))
        .first()
    )
    now = timezone.now()
    if token is None or not token.user.is_active:
        raise TokenInvalid()
    if token.revoked_at is not None:
        raise TokenRevoked()
    if token.expires_at <= now:
        raise TokenExpired()
    if token.permissions is None:
        raise TokenRoleGone()
    check_rate(token.pk)
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    user = token.user
    # Narrow the user (this in-memory instance only, never saved) to the token's project and
    # role: ProjectRoleBackend and restrict() read exactly these.
    user.is_superuser = False
    user._project_permissions = {token.project_id: frozenset(token.permissions)}
    user.api_token = token
    return user


def check_rate(token_id: int) -> None:
    """At most ``API_RATE_PER_MINUTE`` requests per token in a minute from its first one
    (``portal.iam.throttle``'s limiter), else 429; Retry-After is the window's length, which
    the window's end is never later than."""
    limit = int(getattr(settings, "API_RATE_PER_MINUTE", 600))
    if API_RATE.hit(str(token_id), API_RATE_WINDOW_SECONDS) > limit:
        raise RateLimited(limit=limit, retry_after=API_RATE_WINDOW_SECONDS)
