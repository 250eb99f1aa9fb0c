"""A VM's health (정상, 의심, 점검 중, 격리, 교체 중), apart from whether it runs, and the
evidence that set it.

Every change of health goes through ``apply_locked`` (or ``apply_health``, which locks the VM
first): the evidence's rule in ``RULES`` says which state it moves a VM to and from which
states; a VM in any other state is left as it is. A change saves the state, the instant and
the evidence (a notice code of ``portal.foundation.event_text`` and its params, rendered in
the reader's language) and writes one audit event (활동) in the same transaction; evidence
that changes nothing (the same state with the same evidence, or a state the rule does not
move from) writes nothing, so a sweep may say the same thing every pass. Code that acts on a
change (a policy, spares, notifications) hooks here, on the ``Change`` it returns.

Where the evidence comes from:

- the agent silent for ``METRICS_AGENT_SILENT_SECONDS`` while its member runs, and back
  (``sweep``, run by the beat: ``vms.tasks.sweep_health``);
- a guest that died while it should run (libvirt's lifecycle event or the reconciler:
  ``vms.progress``);
- GPU errors the agent's samples carry: a new XID, more uncorrectable ECC errors or remapped
  rows (``metrics.storage.events``);
- 클러스터 검증: a run starting on a suspect or isolated member (점검 중), its verdict
  (``clusters.validation.jobs``);
- 교체 (``clusters.operations.replace``): the member is 교체 중 while it runs, and goes back to
  what it was after (격리 stays 격리, so it is never taken as a spare); the spare that joined
  is 정상;
- the straggler: ``straggler(vm_id, metric, gap, minutes)`` is its entry point.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters import events
from clusters.locking import lock_vms
from clusters.models.validation import Verdict
from clusters.validation.verdict import reason_text
from metrics import liveness
from portal.foundation.audit import Attempt, record
from portal.foundation.event_text import DETAILS
from portal.foundation.kernel import Actor
from portal.models import AuditEvent
from vms.models import VirtualMachine, VmHealth

OK, SUSPECT, CHECKING = VmHealth.OK, VmHealth.SUSPECT, VmHealth.CHECKING
ISOLATED, REPLACING = VmHealth.ISOLATED, VmHealth.REPLACING
NOT_REPLACING = frozenset({OK, SUSPECT, CHECKING, ISOLATED})


@dataclass(frozen=True)
class Rule:
    """Evidence ``code`` moves a VM in one of ``sources`` to ``target``. ``after``: only
    when the VM's present evidence is one of these codes (the agent back clears what its
    silence or a dead guest set, not a GPU error). ``remember``: the state left is kept in
    the evidence (``was``), for ``restore`` to go back to."""

    target: str
    sources: frozenset[str]
    after: frozenset[str] | None = None
    remember: bool = False


SILENT = "health_agent_silent"
BACK = "health_agent_back"
GUEST_DIED = {
    "guest_crashed": "health_guest_crashed",
    "domain_destroyed": "health_domain_destroyed",
}
GPU_ERRORS = ("gpu_xid", "gpu_ecc_uncorrectable", "gpu_remapped_rows")
STRAGGLER = "health_straggler"
STRAGGLER_GONE = "health_straggler_gone"
VALIDATING = "health_validation_running"
VALIDATED_OK = "health_validation_ok"
VALIDATED_BAD = "health_validation_bad"
REPLACING_CODE = "health_replacing"
JOINED = "health_joined"

# What each piece of evidence does: the one table.
RULES: dict[str, Rule] = {
    SILENT: Rule(SUSPECT, frozenset({OK})),
    BACK: Rule(OK, frozenset({SUSPECT}), after=frozenset({SILENT, *GUEST_DIED.values()})),
    **{code: Rule(SUSPECT, frozenset({OK, SUSPECT, CHECKING})) for code in GUEST_DIED.values()},
    **{code: Rule(SUSPECT, frozenset({OK, SUSPECT, CHECKING})) for code in GPU_ERRORS},
    STRAGGLER: Rule(SUSPECT, frozenset({OK})),
    STRAGGLER_GONE: Rule(OK, frozenset({SUSPECT}), after=frozenset({STRAGGLER})),
    VALIDATING: Rule(CHECKING, frozenset({SUSPECT, ISOLATED}), remember=True),
    VALIDATED_OK: Rule(OK, frozenset({SUSPECT, CHECKING, ISOLATED})),
    VALIDATED_BAD: Rule(ISOLATED, NOT_REPLACING),
    REPLACING_CODE: Rule(REPLACING, NOT_REPLACING, remember=True),
    JOINED: Rule(OK, frozenset({SUSPECT, CHECKING, ISOLATED})),
}


@dataclass(frozen=True)
class Change:
    """What ``apply_locked`` changed: the VM, the state before, the state and evidence now."""

    vm_id: int
    before: str
    after: str
    code: str
    params: dict


# What acts on a change, in its transaction with the VM locked: registered by the app that
# owns the action as it loads (the clusters app's 교체 정책: ``clusters.operations.heal``).
LISTENERS: list[Callable[[VirtualMachine, Change], None]] = []


def _write(vm: VirtualMachine, target: str, code: str, params: dict, actor: Actor) -> Change:
    before = vm.health
    vm.health, vm.health_code, vm.health_params = target, code, params
    vm.health_changed_at = timezone.now()
    vm.save(update_fields=["health", "health_changed_at", "health_code", "health_params"])
    att = Attempt(action=f"vm.health_{target.lower()}", actor=actor, target_type="vm")
    att.about(vm)
    att.notice(code, **params)
    record(att, AuditEvent.Outcome.SUCCEEDED)
    events.member_health_changed(vm, before, code, params)
    change = Change(vm.pk, before, target, code, params)
    for listener in LISTENERS:
        listener(vm, change)
    return change


def apply_locked(
    vm: VirtualMachine, code: str, params: dict | None = None, *, actor: Actor = None
) -> Change | None:
    """Apply evidence ``code`` (``params``) to ``vm``, whose row the caller holds locked
    (``clusters.locking``): the change, or None when the rule leaves it as it is."""
    rule = RULES[code]
    params = dict(params or {})
    if vm.health not in rule.sources:
        return None
    if rule.after is not None and vm.health_code not in rule.after:
        return None
    if rule.remember:
        params["was"] = {"health": vm.health, "code": vm.health_code, "params": vm.health_params}
    if (rule.target, code, params) == (vm.health, vm.health_code, vm.health_params):
        return None
    return _write(vm, rule.target, code, params, actor)


def restore(vm: VirtualMachine, state: str, *, actor: Actor = None) -> Change | None:
    """Back to what ``vm`` was before ``state`` (점검 중 or 교체 중, which remember it): a
    검증 that judged it neither 정상 nor 불량, a 교체 that ended. A VM not in ``state`` has
    moved on since (a dead guest while it was checked) and is left as it is."""
    was = vm.health_params.get("was") if vm.health == state else None
    if not isinstance(was, dict) or was.get("health") not in VmHealth.values:
        return None
    return _write(vm, was["health"], was.get("code", ""), was.get("params") or {}, actor)


def apply_health(
    vm_id: int, code: str, params: dict | None = None, *, actor: Actor = None
) -> Change | None:
    """``apply_locked`` in a transaction of its own, on the VM locked (a VM gone: None)."""
    with transaction.atomic():
        locked = lock_vms(vm_id)
        return apply_locked(locked[0], code, params, actor=actor) if locked else None


# ---------------------------------------------------------------------------------------------
# The sources


def sweep(now: datetime | None = None) -> list[Change]:
    """The agents of running members: one silent for ``METRICS_AGENT_SILENT_SECONDS`` (that
    has called since its VM started: ``metrics.liveness``) makes a 정상 member 의심; one
    that calls again clears what its silence or a dead guest set. Two queries when nothing
    changes: each asks only for the members whose health it would change."""
    seconds = liveness.silent_seconds()
    silent = liveness.silent(now).filter(vm__cluster__isnull=False, vm__health=OK)
    back = liveness.calling(now).filter(
        vm__cluster__isnull=False, vm__health=SUSPECT, vm__health_code__in=RULES[BACK].after
    )
    changes = []
    for vm_id in silent.values_list("vm_id", flat=True):
        changes.append(apply_health(vm_id, SILENT, {"seconds": seconds}))
    for vm_id in back.values_list("vm_id", flat=True):
        changes.append(apply_health(vm_id, BACK))
    return [change for change in changes if change is not None]


def guest_died(vm: VirtualMachine, reason: str) -> Change | None:
    """A running VM whose guest crashed or whose domain was destroyed outside the portal
    (``reason``, the lifecycle event's); a shutdown from inside is no fault."""
    code = GUEST_DIED.get(reason)
    return apply_locked(vm, code) if code is not None else None


def gpu_error(vm_id: int, code: str, params: dict) -> Change | None:
    """A GPU error event of ``metrics.storage.events`` (``gpu_xid`` …, its params)."""
    return apply_health(vm_id, code, params) if code in GPU_ERRORS else None


def straggler(vm_id: int, device: str, gap: float, minutes: int) -> Change | None:
    """The straggler rule's verdict: ``device``'s utilisation (``"GPU 2"``, or ``"GPU"`` for
    the member's mean: no words, the message says them in the reader's language) stayed
    ``gap`` percentage points under the cluster median for ``minutes``."""
    return apply_health(
        vm_id, STRAGGLER, {"device": device, "gap": round(float(gap), 1), "minutes": int(minutes)}
    )


def validation_started(members: Iterable[VirtualMachine], run_id: int, actor: Actor) -> None:
    """A 검증 run opened on ``members`` (locked by the caller): the suspect and isolated
    ones are 점검 중 until its verdict."""
    for vm in members:
        apply_locked(vm, VALIDATING, {"run": run_id}, actor=actor)


def validation_judged(judged: dict[int, tuple[str, list]], run_id: int, actor: Actor) -> None:
    """A run's verdicts (``{vm_id: (verdict, reasons)}``): 불량 isolates with its reasons,
    정상 makes the member 정상, anything else puts a checked member back as it was."""
    for vm in lock_vms(*judged):
        verdict, reasons = judged[vm.pk]
        if verdict == Verdict.BAD:
            params = {"run": run_id, "reasons": [_reason(r) for r in reasons]}
            apply_locked(vm, VALIDATED_BAD, params, actor=actor)
        elif verdict == Verdict.OK:
            apply_locked(vm, VALIDATED_OK, {"run": run_id}, actor=actor)
        else:
            restore(vm, CHECKING, actor=actor)


def _reason(reason: dict) -> dict:
    return {"code": reason.get("code", ""), "params": reason.get("params", {})}


def replace_started(
    member: VirtualMachine, spare: VirtualMachine, operation_id: int, actor: Actor
) -> Change | None:
    """A 교체 of ``member`` (locked) for ``spare`` began."""
    params = {"operation": operation_id, "spare": spare.name}
    return apply_locked(member, REPLACING_CODE, params, actor=actor)


def replace_ended(member_id: int | None, spare_id: int | None, joined: bool, actor: Actor) -> None:
    """A 교체 ended: the member goes back to what it was (격리 stays 격리); the spare, if it
    joined and runs, is 정상."""
    locked = {vm.pk: vm for vm in lock_vms(*[pk for pk in (member_id, spare_id) if pk])}
    member = locked.get(member_id) if member_id else None
    if member is not None:
        restore(member, REPLACING, actor=actor)
    spare = locked.get(spare_id) if spare_id else None
    if joined and spare is not None:
        apply_locked(spare, JOINED, {"member": member.name if member else ""}, actor=actor)


# ---------------------------------------------------------------------------------------------
# Words


def _validation_reasons(params: dict[str, Any]) -> str:
    reasons = params.get("reasons")
    if not isinstance(reasons, list):
        return ""
    return "; ".join(reason_text(r) for r in reasons if isinstance(r, dict))


DETAILS[VALIDATED_BAD] = _validation_reasons
