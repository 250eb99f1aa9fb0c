"""A project's webhooks (docs/rules.md#webhooks): create one (its secret made here and shown
once), delete one, send it a test event; the rules each refusal comes from.

A URL is http:// or https:// with a host, no user or password, at most 2000 characters; a
host written as an address (or ``localhost``) the portal will not send to is refused here,
and every address a name resolves to is checked again before each attempt
(``delivery.blocked``)."""

import ipaddress
import secrets
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from portal.foundation.audit import attempt
from portal.foundation.errors import RuleViolation
from portal.foundation.errors.webhooks import (
    MAX_URL_LENGTH,
    MAX_WEBHOOKS_PER_PROJECT,
    WebhookEventsRequired,
    WebhookEventUnknown,
    WebhookLimit,
    WebhookNameTaken,
    WebhookUrlAddress,
    WebhookUrlCredentials,
    WebhookUrlRefused,
    WebhookUrlScheme,
    WebhookUrlTooLong,
)
from portal.foundation.kernel import (
    Actor,
    begin_create,
    permission_refusal,
    raise_if,
    recorded_user,
    save_unique,
)
from portal.iam.permissions import Perm
from portal.models import Project, readable
from portal.webhooks import events as webhook_events
from portal.webhooks.delivery import blocked
from portal.webhooks.models import TEST_EVENT, EventType, Webhook, WebhookDelivery

# ---------------------------------------------------------------------------------------------
# The rules and their preflights


def url_refusal(url: Any) -> RuleViolation | None:
    """Whether ``url`` may receive a project's events."""
    if not isinstance(url, str) or not url.strip():
        return WebhookUrlRefused()
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        return WebhookUrlTooLong(max=MAX_URL_LENGTH)
    if any(ord(c) < 33 or ord(c) == 127 for c in url):  # spaces, line breaks, NUL
        return WebhookUrlRefused()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return WebhookUrlRefused()
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return WebhookUrlScheme(scheme=scheme[:20] or "-") if scheme else WebhookUrlRefused()
    if not parts.hostname:
        return WebhookUrlRefused()
    if parts.username is not None or parts.password is not None:
        return WebhookUrlCredentials()
    host = parts.hostname
    literal: str | None
    try:
        literal = str(ipaddress.ip_address(host))
    except ValueError:
        literal = "127.0.0.1" if host == "localhost" or host.endswith(".localhost") else None
    if literal is not None and blocked(literal):
        return WebhookUrlAddress(address=host)
    return None


def checked_events(chosen: Any) -> list[str]:
    """The event types ``chosen`` names, each once in the order of ``EventType``."""
    if isinstance(chosen, str) or not isinstance(chosen, Iterable):
        raise WebhookEventsRequired()
    wanted = list(chosen)
    for name in wanted:
        if name not in EventType.values:
            raise WebhookEventUnknown(name=str(name)[:60])
    if not wanted:
        raise WebhookEventsRequired()
    return [value for value in EventType.values if value in wanted]


def preflight_create(actor: Actor, project: Project) -> RuleViolation | None:
    return permission_refusal(actor, Perm.WEBHOOK_CREATE, project)


def preflight_delete(actor: Actor, webhook: Webhook) -> RuleViolation | None:
    return permission_refusal(actor, Perm.WEBHOOK_DELETE, webhook)


def preflight_test(actor: Actor, webhook: Webhook) -> RuleViolation | None:
    return permission_refusal(actor, Perm.WEBHOOK_UPDATE, webhook)


# ---------------------------------------------------------------------------------------------
# User actions


def _about(att: Any, webhook: Webhook) -> None:
    """The audit event names the webhook and where it sends (never its secret)."""
    att.target_id, att.target_name, att.project_id = webhook.pk, webhook.name, webhook.project_id
    att.message = webhook.url[:2000]


def new_secret() -> str:
    return Webhook.SECRET_PREFIX + secrets.token_urlsafe(32)


def create_webhook(
    *, actor: Actor, project: Project, name: Any, url: Any, events: Any = None
) -> Webhook:
    """Register ``url`` in ``project`` under ``name`` (the name rule of clusters and VMs) for
    ``events`` (None: every event type). Its ``secret`` is on the returned row: the caller
    shows it once. A refusal saves nothing; every attempt is audited."""
    with attempt("webhook.create", actor=actor, target_type="webhook") as att:
        checked = begin_create(att, actor, Perm.WEBHOOK_CREATE, project, name)
        raise_if(url_refusal(url))
        chosen = checked_events(EventType.values if events is None else events)
        hooks = Webhook.objects.select_for_update().filter(project=project)
        if len(hooks) >= MAX_WEBHOOKS_PER_PROJECT:
            raise WebhookLimit(max=MAX_WEBHOOKS_PER_PROJECT)
        if any(hook.name == checked for hook in hooks):
            raise WebhookNameTaken()
        webhook = Webhook(
            project=project,
            name=checked,
            url=str(url).strip(),
            events=chosen,
            secret=new_secret(),
            created_by=recorded_user(actor),
        )
        save_unique(webhook, WebhookNameTaken)
        _about(att, webhook)
    return webhook


def delete_webhook(webhook_id: object, *, actor: Actor) -> Webhook:
    """Delete a webhook with its deliveries and their log: nothing more is sent to it (an
    attempt on its way finds its delivery gone and logs nothing). A webhook the actor may not
    read is not found before anything is attempted; one they may read but not delete is
    refused, audited."""
    hooks = readable(actor, Perm.WEBHOOK_READ, Webhook)
    hooks.get_or_404(webhook_id)
    with attempt("webhook.delete", actor=actor, target_type="webhook") as att:
        webhook = hooks.select_for_update().get_or_404(webhook_id)
        _about(att, webhook)
        raise_if(preflight_delete(actor, webhook))
        webhook.delete()
    return webhook


def send_test(webhook_id: object, *, actor: Actor) -> WebhookDelivery:
    """테스트 전송: a ``webhook.test`` event to this webhook alone, whatever it subscribes to,
    signed, retried and logged like any other; audited."""
    hooks = readable(actor, Perm.WEBHOOK_READ, Webhook)
    hooks.get_or_404(webhook_id)
    with attempt("webhook.test", actor=actor, target_type="webhook") as att:
        webhook = hooks.get_or_404(webhook_id)
        _about(att, webhook)
        raise_if(preflight_test(actor, webhook))
        data = {"webhook": {"id": webhook.pk, "name": webhook.name}}
        (delivery_id,) = webhook_events.queue(webhook.project_id, [webhook.pk], TEST_EVENT, data)
    return WebhookDelivery.objects.get(pk=delivery_id)
