"""The loop a cluster's 교체 정책 closes (docs/rules.md#a-clusters-policy), each step an
Operation with the evidence that started it, done by the system (no actor) under the policy
its owner set, named in the evidence and the audit event (``cluster.policy_act``):

- a member's health moves to 의심 (``vms.health``, which calls ``on_health_change``): under
  교체 제안 and 자동 교체, a targeted 검증 of that member and its ring neighbours, if the
  cluster runs and no 검증 or 교체 is open on it (a second suspect meanwhile waits for its
  next evidence); under 알림만 the system runs nothing on the customer's members — the
  health change and its webhook are the notice;
- a 검증 judges a member 불량 (격리): under 자동 교체 a 교체 with the cluster's best 예비;
  under 교체 제안 the members tab proposes it (``proposal``); under 알림만 nothing but the
  health change and its webhook;
- a 교체 that took a 예비 and left it running in a running cluster: a targeted 검증 of the
  new member's links (``verify_joined``). Judged 불량, it is 격리 like any member, so under
  자동 교체 the next 예비 takes its place; with none left it stays 격리 with the reason
  (``no_spare``) in 활동.

Each step runs in a task after the change that called for it has committed.
"""

from typing import Any

from django.db import transaction

from clusters.models import ClusterStatus, Operation, ReplacePolicy, VirtualCluster
from clusters.operations.replace import replace_member
from clusters.operations.validate import start_validation
from clusters.policy import acting_under
from clusters.spares import best_spares
from portal.foundation.audit import Attempt, build_event, record_many
from portal.foundation.broker import publish
from portal.foundation.errors import RuleViolation
from portal.models import AuditEvent
from vms import health
from vms.models import VirtualMachine, VmHealth, VmStatus


def on_health_change(vm: VirtualMachine, change: health.Change) -> None:
    """``vms.health``'s listener: a member just made 의심 is checked, one just judged 불량
    is acted on, each by a task after the change commits."""
    if vm.cluster_id is None:
        return
    if change.after == VmHealth.SUSPECT:
        transaction.on_commit(lambda: publish("clusters.tasks.check_suspect", vm.pk))
    elif change.after == VmHealth.ISOLATED and change.code == health.VALIDATED_BAD:
        run = change.params.get("run")
        transaction.on_commit(lambda: publish("clusters.tasks.act_on_bad", vm.pk, run))


if on_health_change not in health.LISTENERS:  # loaded once per process (clusters.apps)
    health.LISTENERS.append(on_health_change)


def _busy(cluster: VirtualCluster) -> bool:
    """A 교체 open on the cluster: nothing more is started until it ends."""
    return Operation.objects.open().filter(cluster=cluster, kind=Operation.Kind.REPLACE).exists()


def _evidence(vm: VirtualMachine, cluster: VirtualCluster, **more: Any) -> dict[str, Any]:
    params = {k: v for k, v in (vm.health_params or {}).items() if k != "was"}
    return {
        "member": vm.name,
        "code": vm.health_code,
        "params": params,
        **more,
        **acting_under(cluster),
    }


def _audit(
    cluster: VirtualCluster, evidence: dict[str, Any], refusal: RuleViolation | None = None
) -> None:
    """``cluster.policy_act``: what the system did (or was refused) under the policy, with
    who set it and when."""
    att = Attempt(action="cluster.policy_act", actor=None, target_type="cluster")
    att.about(cluster)
    att.message = (
        f"{evidence.get('action', '')} {evidence.get('member', '')} · "
        f"{evidence['policy']} ({evidence['set_by'] or '-'}, {evidence['set_at'] or '-'})"
    )
    outcome = AuditEvent.Outcome.REFUSED if refusal is not None else AuditEvent.Outcome.SUCCEEDED
    record_many([build_event(att, outcome, refusal)])


def _member(vm_id: int) -> tuple[VirtualMachine | None, VirtualCluster | None]:
    vm = VirtualMachine.objects.filter(pk=vm_id).select_related("cluster").first()
    if vm is None or vm.cluster is None:
        return None, None
    return vm, vm.cluster


def check_suspect(vm_id: int) -> Operation | None:
    """A targeted 검증 of a member still 의심 and running, in a running cluster under 교체 제안
    or 자동 교체 with no 검증 or 교체 open; None when there is nothing to do or the 검증 is
    refused (a run already open: its verdict speaks for the member too)."""
    vm, cluster = _member(vm_id)
    if vm is None or cluster is None or vm.health != VmHealth.SUSPECT:
        return None
    if cluster.policy == ReplacePolicy.NOTIFY:
        return None  # 알림만: a diagnostic run takes the members' GPUs and links from the job
    if vm.status != VmStatus.RUNNING or cluster.status != ClusterStatus.RUNNING or _busy(cluster):
        return None
    evidence = _evidence(vm, cluster, action="validate")
    try:
        operation = start_validation(cluster.pk, actor=None, focus=vm.pk, evidence=evidence)
    except RuleViolation:
        return None
    _audit(cluster, evidence)
    return operation


def act_on_bad(vm_id: int, run_id: int | None = None) -> Operation | None:
    """A member judged 불량: under 자동 교체, the 교체 with the best 예비 (a refusal, such as
    ``no_spare``, is audited with its reason and changes nothing)."""
    vm, cluster = _member(vm_id)
    if vm is None or cluster is None or vm.health != VmHealth.ISOLATED:
        return None
    if cluster.policy != ReplacePolicy.AUTO or _busy(cluster):
        return None
    evidence = _evidence(vm, cluster, action="replace", run=run_id)
    try:
        operation = replace_member(cluster.pk, vm.pk, actor=None, evidence=evidence)
    except RuleViolation as refusal:
        _audit(cluster, evidence, refusal)
        return None
    _audit(cluster, evidence)
    return operation


def verify_joined(operation_id: int) -> Operation | None:
    """After a 교체 that took a 예비: a targeted 검증 of the new member's links, if it runs
    in a running cluster."""
    operation = Operation.objects.filter(pk=operation_id, kind=Operation.Kind.REPLACE).first()
    if operation is None or operation.cluster is None:
        return None
    items = list(operation.items.select_related("vm").order_by("position"))
    spare = items[1].vm if len(items) > 1 else None
    cluster = operation.cluster
    if spare is None or spare.cluster_id != cluster.pk or spare.status != VmStatus.RUNNING:
        return None
    if cluster.status != ClusterStatus.RUNNING:
        return None
    evidence = {
        "member": spare.name,
        "code": "replace_joined",
        "params": {"operation": operation.pk},
        "action": "validate",
        **acting_under(cluster),
    }
    try:
        return start_validation(
            cluster.pk, actor=operation.actor, focus=spare.pk, evidence=evidence
        )
    except RuleViolation:
        return None


def proposal(cluster: VirtualCluster) -> list[dict[str, Any]]:
    """Under 교체 제안: each 격리 member with the 예비 a 교체 would take now (none when the
    cluster keeps none that may, or a 교체 is open)."""
    if cluster.policy != ReplacePolicy.PROPOSE or _busy(cluster):
        return []
    found = []
    for member in cluster.members.filter(health=VmHealth.ISOLATED).order_by("node_rank", "pk"):
        best = best_spares(cluster, member)
        if best:
            found.append({"member": member, "spare": best[0]})
    return found
