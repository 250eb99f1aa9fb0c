"""The audit trail: every attempted action, refused ones included, and a log line for each."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from portal.foundation.errors import RuleViolation
from portal.foundation.kernel import check_perm, permission_refusal
from portal.foundation.request_ids import request_ids
from portal.models import AuditEvent, Project

log = logging.getLogger("portal.foundation.audit")


@dataclass
class Attempt:
    """What a service fills in while it runs, so the audit event names what it touched."""

    action: str
    actor: object
    target_type: str
    target_id: int | None = None
    target_name: str = ""
    project_id: int | None = None
    cluster_id: int | None = None
    message: str = ""
    code: str = ""
    params: dict = field(default_factory=dict)
    # A bulk action that ran but whose items did not all succeed: recorded as 실패, so the
    # 활동 tab says 성공 only when every item did.
    failed: bool = False

    def about(self, obj: Any) -> Any:
        self.target_id = obj.pk
        self.target_name = str(getattr(obj, "name", obj))[:100]
        self.project_id = obj.project_id
        self.cluster_id = obj.pk if self.target_type == "cluster" else obj.cluster_id
        return obj

    def notice(self, code: str, **params: Any) -> None:
        """What the event will say: a notice code of ``portal.foundation.event_text``, its
        params."""
        self.code, self.params = code, params

    def items_done(self, total: int, failed: int) -> None:
        """A bulk action's end: every item succeeded, or how many of them failed (then the
        event is recorded as 실패)."""
        if failed:
            self.notice("operation_done", total=total, failed=failed)
            self.failed = True
        else:
            self.notice("operation_all_done", total=total)


_CONTROL = dict.fromkeys(c for c in range(32) if c not in (9, 10))


def printable(text, limit):
    """What a user typed, safe to store: no NUL/control characters (PostgreSQL rejects NUL)."""
    return str(text).translate(_CONTROL)[:limit]


def build_event(attempt, outcome, error: RuleViolation | None = None) -> AuditEvent:
    """The audit event of ``attempt``, not saved; a refusal or failure stores ``error``'s code."""
    actor = attempt.actor if getattr(attempt.actor, "pk", None) else None
    if error is not None:
        stored = error.stored()
        code, params = stored["code"], stored["params"]
        # An error whose words cannot be named by its code keeps them as plain text.
        text = error.message if error._override is not None else ""
    else:
        code, params, text = attempt.code, attempt.params, attempt.message
    ids = request_ids()
    return AuditEvent(
        project_id=attempt.project_id,
        actor=actor,
        action=attempt.action,
        target_type=attempt.target_type,
        target_id=attempt.target_id,
        target_name=printable(attempt.target_name, 100),
        cluster_id=attempt.cluster_id,
        outcome=outcome,
        code=code,
        params=params,
        message=printable(text, 2000),
        request_id=ids.server,
        client_request_id=printable(ids.client, 64),
    )


def _log(event) -> None:
    log.info(
        "action=%s outcome=%s target=%s:%s project=%s actor=%s code=%s message=%r",
        event.action,
        event.outcome,
        event.target_type,
        event.target_id,
        event.project_id,
        getattr(event.actor, "username", "system"),
        event.code,
        event.message,
    )


def record(attempt, outcome, error: RuleViolation | None = None) -> AuditEvent:
    """Write the audit event of ``attempt`` (and its log line)."""
    event = build_event(attempt, outcome, error)
    event.save()
    _log(event)
    return event


def record_many(events: list[AuditEvent]) -> None:
    """Write events made by ``build_event`` in one statement (a bulk action's per-VM events)."""
    AuditEvent.objects.bulk_create(events)
    for event in events:
        _log(event)


@contextmanager
def attempt(
    action: str, *, actor: object, target_type: str, target_id: int | None = None
) -> Iterator[Attempt]:
    """Run a state change in one transaction and audit it.

    Success is recorded inside the transaction (it commits with the change); a refusal
    (``RuleViolation``) is recorded after the rollback, then re-raised.
    """
    att = Attempt(action=action, actor=actor, target_type=target_type, target_id=target_id)
    try:
        with transaction.atomic():
            yield att
            record(att, AuditEvent.Outcome.FAILED if att.failed else AuditEvent.Outcome.SUCCEEDED)
    except RuleViolation as exc:
        record(att, AuditEvent.Outcome.REFUSED, exc)
        raise


def require_perm(action, actor, permission, obj, *, target_type, target_name="") -> None:
    """``check_perm`` on ``obj`` (a project, or the cluster a bulk action is about), audited
    as ``action``: who lacks ``permission`` is refused whole with the event the action
    itself would record, before anything they sent is read (a form, a list of targets)."""
    if permission_refusal(actor, permission, obj) is None:
        return
    with attempt(action, actor=actor, target_type=target_type) as att:
        if isinstance(obj, Project):
            att.project_id, att.target_name = obj.pk, str(target_name or "")[:100]
        else:
            att.about(obj)
        check_perm(actor, permission, obj)
