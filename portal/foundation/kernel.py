"""The pieces every service shares: the permission check, the status setter, the name and id
rules, and queueing the slow part after commit.

``clusters`` and ``vms`` (and ``metrics``) import these; this module imports no app, so the
apps depend on ``portal`` and never on each other's internals for them.
"""

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.foundation.broker import publish
from portal.foundation.errors import (
    InvalidTransition,
    NameInvalid,
    NameRequired,
    NameTooLong,
    NotFound,
    PermissionRequired,
    RuleViolation,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)

# Who asks for a change: a user, or None for the system (tasks, the reconciler).
Actor: TypeAlias = "User | None"

NAME_MAX = 63
NAME_RE = re.compile(r"^[0-9A-Za-z가-힣-]+$")
# Ids are bigint in PostgreSQL; anything larger cannot name a row (and would be a DataError).
ID_MAX = 2**62


def check_perm(actor: Actor, permission: str, obj: Any) -> None:
    """Raise ``PermissionRequired`` unless ``actor`` holds ``permission`` on ``obj``.

    ``actor=None`` is the system (tasks, the reconciler): it may do anything.
    """
    if actor is not None and not actor.has_perm(permission, obj):
        raise PermissionRequired(permission)


def recorded_user(actor: Actor) -> "User | None":
    """The user a record names as its maker (``created_by``, ``actor``): none for the system
    or a user not saved (anonymous)."""
    return actor if getattr(actor, "pk", None) else None


@dataclass(frozen=True)
class Step:
    """One row of a transition table: ``action`` moves from any of ``sources`` to one of
    ``targets``; a ``system`` step is taken by a worker, never asked for by a user."""

    action: str
    sources: frozenset[str]
    targets: frozenset[str]
    system: bool = False


class Lifecycle:
    """A model's transition table and the status sets read from it (never listed twice).

    - ``allowed``: status -> the statuses it may move to;
    - ``sources(action)``: where ``action`` may start (e.g. the startable statuses);
    - ``transitional``: statuses only a worker moves on from (the page polls, the reconciler
      repairs them);
    - ``stable``: the rest; ``terminal``: stable statuses with no way out.
    """

    def __init__(self, statuses: Iterable[str], *steps: Step) -> None:
        statuses = list(statuses)
        self.steps = {step.action: step for step in steps}
        self.allowed: dict[str, frozenset[str]] = {
            status: frozenset(
                target for step in steps if status in step.sources for target in step.targets
            )
            for status in statuses
        }
        self.transitional = frozenset(
            status for step in steps if step.system for status in step.sources
        )
        self.stable = frozenset(statuses) - self.transitional
        self.terminal = frozenset(status for status in self.stable if not self.allowed[status])

    def sources(self, action: str) -> frozenset[str]:
        return self.steps[action].sources


def step(
    action: str, sources: Iterable[str], targets: str | Iterable[str], *, system: bool = False
) -> Step:
    to = {targets} if isinstance(targets, str) else targets
    return Step(action, frozenset(sources), frozenset(to), system)


def permission_refusal(actor: Actor, permission: str, obj: Any) -> PermissionRequired | None:
    """``check_perm`` as a preflight: the refusal it would raise, or None."""
    if actor is not None and not actor.has_perm(permission, obj):
        return PermissionRequired(permission)
    return None


# What a rule function (``*_refusal``, ``preflight_*``) returns: the refusal, or None.
Refusal: TypeAlias = RuleViolation | None


def raise_if(refusal: Refusal) -> None:
    """Raise the refusal a rule function returned, if any."""
    if refusal is not None:
        raise refusal


def set_status(obj: Any, new_status: str, lifecycle: Lifecycle) -> None:
    """Move ``obj`` to ``new_status`` if its transition table allows it (a bug otherwise)."""
    if new_status not in lifecycle.allowed[obj.status]:
        raise InvalidTransition()
    obj.status = new_status
    obj.status_changed_at = timezone.now()


def parse_id(value: object) -> int | None:
    """A positive id from a form, URL or JSON body, or None (unicode digits, signs, spaces
    around, floats, booleans and values beyond bigint are all None)."""
    if isinstance(value, bool):
        return None
    text = str(value).strip() if value is not None else ""
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if 0 < number <= ID_MAX else None


def id_for_lookup(value: object) -> int:
    """``parse_id`` for a filter: 0, which no row has, when ``value`` names no row."""
    return parse_id(value) or 0


def require_id(value: object, error: type[RuleViolation] = NotFound) -> int:
    """``parse_id`` for a row the caller must find: anything else is ``error`` (a 404)."""
    number = parse_id(value)
    if number is None:
        raise error()
    return number


def validate_name(raw: str | None) -> str:
    """Trim and check a resource name: 1-63 letters, digits, hyphens or Korean."""
    name = (raw or "").strip()
    if not name:
        raise NameRequired()
    if len(name) > NAME_MAX:
        raise NameTooLong(max=NAME_MAX)
    if not NAME_RE.match(name):
        raise NameInvalid()
    return name


def begin_create(att: Any, actor: Actor, permission: str, project: Any, raw: str | None) -> str:
    """What every create does first: audit under ``project`` with the name as typed, check
    ``permission`` in the project, then the name rule. Returns the checked name."""
    att.project_id = project.pk
    att.target_name = str(raw or "")[:100]
    check_perm(actor, permission, project)
    return validate_name(raw)


def save_unique(obj: Any, taken: type[RuleViolation], **save: Any) -> None:
    """Save ``obj`` in a savepoint: a unique value a concurrent write took between the check
    and this write (a name, by another create or rename) is ``taken``, not a 500."""
    try:
        with transaction.atomic():
            obj.save(**save)
    except IntegrityError:
        raise taken() from None


def rename(
    obj: Any,
    raw: str | None,
    att: Any,
    refusal: Callable[[Any, str], RuleViolation | None],
    taken: type[RuleViolation],
) -> None:
    """Give ``obj`` (a cluster or a VM, locked) the name ``raw`` by the name rule and its
    ``refusal``, audited on ``att`` as old → new; a name a concurrent write took meanwhile
    is ``taken``. The same name again changes nothing."""
    name = validate_name(raw)
    if name == obj.name:
        return
    raise_if(refusal(obj, name))
    att.message = f"{obj.name} → {name}"
    obj.name = name
    save_unique(obj, taken, update_fields=["name"])
    att.target_name = name


def queue_after_commit(task: Any, *args: Any) -> None:
    """Send ``task`` (a task, or its name: ``portal.foundation.broker.publish``) once the
    transaction commits.

    The change is made whatever the broker says: if it cannot take the message (down,
    restarting, its folder gone), the step is left to the reconciler (``clusters.progress``)
    instead of turning a change that happened into a 500.
    """
    transaction.on_commit(lambda: publish(task, *args))
