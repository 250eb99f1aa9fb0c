"""교체: swap a member for a stopped, eligible spare as one Operation.

Item 0 is the member (stopped through ``stop_vm`` if it runs, then detached), item 1 the
spare (attached, then started through ``start_vm`` if the cluster runs). The swap itself is
one transaction on the locked rows: the spare joins at the member's ``node_rank`` first and
the member leaves after, so ``attach_refusal`` and ``detach_refusal`` each decide on the
rows as they are, and a running cluster never drops below two members in between. The
steps that wait for a VM to settle are walked by ``advance_replace``, which reads the items
(not ``operation.done``) to know where it is.

The end state is the member replaced, or the cluster as it was. The spare is locked and held
for the replace (``clusters.holds``) before the member is touched, so starting, deleting or
attaching it meanwhile is refused; and should the swap be refused all the same (the spare's
permission withdrawn, the cluster changed), the member this replace stopped is started again.
"""

from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters import events, services, spares
from clusters.holds import hold_refusal
from clusters.locking import lock_cluster, lock_members, lock_vm, lock_vms
from clusters.models import ClusterStatus, Operation, OperationItem, VirtualCluster
from clusters.operations.fanout import actor_of
from clusters.operations.internal import (
    ItemStatus,
    add_item,
    cluster_operation,
    finish_operation,
    succeed_item,
    vm_refusal,
    vm_update_frame,
)
from portal.foundation.audit import Attempt, build_event, record_many
from portal.foundation.broker import publish
from portal.foundation.errors import (
    InvalidTransition,
    NoSpare,
    NotMember,
    OperationCancelled,
    RuleViolation,
    VmNotFound,
)
from portal.foundation.kernel import Actor, id_for_lookup, raise_if
from portal.iam.permissions import Perm
from portal.models import AuditEvent
from vms import health
from vms import services as vm_services
from vms.models import VM_STOPPABLE, VM_TRANSITIONAL, VirtualMachine, VmStatus


def replace_refusal(
    cluster: VirtualCluster, member: VirtualMachine, spare: VirtualMachine
) -> RuleViolation | None:
    """What refuses swapping ``member`` of ``cluster`` for ``spare`` now: the member not in
    the cluster or on its way somewhere, membership closed, the spare not attachable
    (``attach_refusal``: the member itself is refused as ``AlreadyMember``) or 격리."""
    return (
        member_refusal(cluster, member)
        or services.attach_refusal(spare, cluster)
        or spares.spare_refusal(spare)
    )


def member_refusal(cluster: VirtualCluster, member: VirtualMachine) -> RuleViolation | None:
    """``replace_refusal``'s part about the member, whatever the spare: the member not in
    the cluster or on its way somewhere, membership closed (the 교체 page asks it before a
    spare is chosen)."""
    if member.cluster_id != cluster.pk:
        return NotMember()
    if refusal := services.membership_refusal(cluster):
        return refusal
    if member.status in VM_TRANSITIONAL:
        return InvalidTransition()
    return None


def replaces_of(cluster: VirtualCluster, member_vm_id: int) -> tuple[Operation | None, ...]:
    """The 교체 of ``member_vm_id`` on ``cluster`` still running, and the last one that
    replaced it (its spare is the second item), each or None: what the 교체 page says
    after the fact."""
    mine = Operation.objects.filter(
        cluster=cluster,
        kind=Operation.Kind.REPLACE,
        items__position=0,
        items__vm_id=member_vm_id,
    ).order_by("-created_at", "-id")
    running = mine.filter(finished_at__isnull=True).first()
    done = mine.filter(finished_at__isnull=False, error_code="").exclude(
        items__status=ItemStatus.FAILED
    )
    return running, done.first()


def preflight_member_replace(
    actor: Actor, cluster: VirtualCluster, member: VirtualMachine
) -> RuleViolation | None:
    """What the 교체 page says before any spare is chosen: the permission on the member
    first, then ``member_refusal``."""
    return vm_refusal(actor, member, Perm.VM_UPDATE) or member_refusal(cluster, member)


def preflight_replace(
    actor: Actor,
    cluster: VirtualCluster,
    member: VirtualMachine | None,
    spare: VirtualMachine | None,
) -> RuleViolation | None:
    """``replace_refusal`` for ``actor``: either VM unseen (not found) or not theirs to
    change (the permission) first."""
    refusal = vm_refusal(actor, member, Perm.VM_UPDATE) or vm_refusal(actor, spare, Perm.VM_UPDATE)
    if refusal is not None or member is None or spare is None:
        return refusal or VmNotFound()  # (a missing VM is refused above, as not found)
    return replace_refusal(cluster, member, spare)


def pool_spare_id(cluster: VirtualCluster, member_vm_id: object) -> int:
    """The cluster's best 예비 for a 교체 of ``member_vm_id`` (``spares.best_spares``), or
    ``NoSpare``."""
    member = VirtualMachine.objects.filter(pk=id_for_lookup(member_vm_id)).first()
    best = spares.best_spares(cluster, member)
    if not best:
        raise NoSpare()
    return int(best[0].pk)


def replace_member(
    cluster_id: object,
    member_vm_id: object,
    spare_vm_id: object = None,
    *,
    actor: Actor,
    idempotency: tuple[str, ...] | None = None,
    evidence: dict[str, Any] | None = None,
) -> Operation:
    """교체: one Operation (items: the member, the spare). Refused whole, changing nothing,
    when ``preflight_replace`` says so; otherwise the member is stopped if it runs and the
    swap follows once it is 중지됨 (at once if it already is). Without ``spare_vm_id`` the
    cluster's best 예비 is taken (``NoSpare`` when it keeps none that may)."""
    evidence = dict(evidence or {})
    with vm_update_frame("operation.replace", actor, cluster_id) as (att, cluster):
        if spare_vm_id is None or spare_vm_id == "":
            evidence["pool"] = True  # taken from the spares: its links are checked after
            member = _peek(member_vm_id)
            raise_if(
                VmNotFound() if member is None else preflight_member_replace(actor, cluster, member)
            )
            spare_vm_id = pool_spare_id(cluster, member_vm_id)
        # Both locked, by id (a request naming both, attach_many, takes them in that order
        # too): a start, delete or attach of the spare waits for this replace, then sees
        # the hold (``clusters.holds``).
        locked = {vm.pk: vm for vm in lock_vms(member_vm_id, spare_vm_id)}
        member = locked.get(id_for_lookup(member_vm_id))
        spare = locked.get(id_for_lookup(spare_vm_id))
        raise_if(
            preflight_replace(actor, cluster, member, spare) or hold_refusal(spare, pool=cluster)
        )
        assert member is not None and spare is not None  # noqa: S101 - refused above if missing
        operation = cluster_operation(
            Operation.Kind.REPLACE, cluster, actor=actor, idempotency=idempotency
        )
        if evidence:
            operation.evidence = evidence
            operation.save(update_fields=["evidence"])
        member_item, spare_item = add_item(operation, 0, member), add_item(operation, 1, spare)
        health.replace_started(member, spare, operation.pk, actor)
        if member.status in VM_STOPPABLE:
            vm_services.stop_vm(member.pk, actor=actor)
            member_item.started_at = timezone.now()
            _watch_after_commit(operation)
        OperationItem.objects.bulk_create([member_item, spare_item])
        events.replacement_started(operation, cluster, member, spare)
        att.message = f"{member.name} → {spare.name}"
        if member_item.started_at is None:
            _step(operation, actor)
    return operation


def _peek(vm_id: object) -> VirtualMachine | None:
    return VirtualMachine.objects.filter(pk=id_for_lookup(vm_id)).first()


def _watch_after_commit(operation: Operation) -> None:
    """Look at the operation again once the VM step just queued has been committed (and,
    with eager tasks, done): ``advance_replace`` after the step's own task."""
    transaction.on_commit(lambda: publish("clusters.tasks.advance_replace", operation.pk))


def _fail(operation: Operation, items: list[OperationItem], error: RuleViolation | None) -> None:
    for item in items:
        if item.status == ItemStatus.PENDING:
            item.status, item.finished_at = ItemStatus.FAILED, timezone.now()
            item.set_error(error)
            item.save(update_fields=["status", "finished_at", "error_code", "error_params"])
    _finish(operation, error, joined=False)


def _finish(operation: Operation, error: RuleViolation | None = None, *, joined: bool) -> None:
    """End the replace, with its items settled: the health its two VMs have after it
    (``vms.health``), and its webhooks hear how it went."""
    member_id, spare_id = operation.items.order_by("position").values_list("vm_id", flat=True)
    health.replace_ended(member_id, spare_id, joined, actor_of(operation))
    finish_operation(operation, error)
    events.replacement_ended(operation)
    if joined and operation.evidence.get("pool"):
        transaction.on_commit(lambda: publish("clusters.tasks.verify_joined", operation.pk))


def _swap(
    operation: Operation, member_item: OperationItem, spare_item: OperationItem, actor: Actor
) -> None:
    """Attach the spare at the member's rank, then detach the member, an audit event each.
    Both rules are asked before either write, the detach's on the members as they will be
    with the spare (so a running cluster of two can swap); a refusal, the cluster's lookup
    too (the actor may no longer read it), changes nothing and ends the replace."""
    attach = Attempt(action="vm.attach", actor=actor, target_type="vm", target_id=spare_item.vm_id)
    detach = Attempt(action="vm.detach", actor=actor, target_type="vm", target_id=member_item.vm_id)
    cluster = member = None
    try:
        cluster = lock_cluster(operation.cluster_id, actor, Perm.CLUSTER_READ)
        members = {vm.pk: vm for vm in lock_members(cluster, spare_item.vm_id)}
        member = members.get(member_item.vm_id) if member_item.vm_id is not None else None
        spare = lock_vm(spare_item.vm_id, actor, Perm.VM_UPDATE, attach)
        raise_if(services.attach_refusal(spare, cluster))
        if member is None:
            raise NotMember()
        after_join = services.MemberStates(count=len(members) + 1)
        raise_if(services.detach_refusal(member, cluster, after_join))
    except RuleViolation as refusal:
        record_many([build_event(attach, AuditEvent.Outcome.REFUSED, refusal)])
        _put_back(member, member_item, cluster, actor)
        _fail(operation, [member_item, spare_item], refusal)
        return
    detach.about(member)
    spares.leave_pool(spare)
    services.join(spare, cluster, rank=member.node_rank)
    services.leave(member)
    for att in (attach, detach):
        att.message, att.cluster_id = cluster.name, cluster.pk
    record_many([build_event(att, AuditEvent.Outcome.SUCCEEDED) for att in (attach, detach)])
    succeed_item(member_item).save(update_fields=["status", "finished_at"])
    if cluster.status == ClusterStatus.RUNNING:
        try:
            vm_services.start_vm(spare.pk, actor=actor)
        except RuleViolation as refusal:  # audited by start_vm; the spare stays attached
            _fail(operation, [spare_item], refusal)
            return
        spare_item.started_at = timezone.now()
        spare_item.save(update_fields=["started_at"])
        _watch_after_commit(operation)
    else:
        succeed_item(spare_item).save(update_fields=["status", "finished_at"])
        _finish(operation, joined=True)


def _put_back(
    member: VirtualMachine | None,
    member_item: OperationItem,
    cluster: VirtualCluster | None,
    actor: Actor,
) -> None:
    """Start again the member this replace stopped (``started_at`` is set only then), so a
    refused swap leaves the running cluster as it was; a start refused now is audited by
    ``start_vm`` and leaves the member stopped."""
    if member is None or member_item.started_at is None or member.status != VmStatus.STOPPED:
        return
    if cluster is None or cluster.status != ClusterStatus.RUNNING:
        return
    try:
        vm_services.start_vm(member.pk, actor=actor)
    except RuleViolation:
        pass


def _step(operation: Operation, actor: Actor) -> bool:
    """Move a replace on from what its items and VMs show now (the caller holds the lock);
    False when it is waiting for a VM to settle."""
    member_item, spare_item = operation.items.select_related("vm").order_by("position")
    if spare_item.status != ItemStatus.PENDING:
        return False
    if member_item.status == ItemStatus.PENDING:
        member = member_item.vm
        if member is not None and member.status in VM_TRANSITIONAL:
            return False
        if operation.evidence.get("cancelled"):  # 취소: never inside the swap, only here
            _put_back(member, member_item, operation.cluster, actor)
            _fail(operation, [member_item, spare_item], OperationCancelled())
        elif member is None:
            _fail(operation, [member_item, spare_item], NotMember())
        elif member.status == VmStatus.STOPPED:
            _swap(operation, member_item, spare_item, actor)
        else:
            _fail(operation, [member_item, spare_item], member.last_error or InvalidTransition())
        return True
    spare = spare_item.vm
    if spare is not None and spare.status in VM_TRANSITIONAL:
        return False
    if spare is not None and spare.status == VmStatus.RUNNING:
        succeed_item(spare_item).save(update_fields=["status", "finished_at"])
        _finish(operation, joined=True)
    else:  # joined but not 실행중 (its start failed, or it was stopped): not NotMember
        why = NotMember() if spare is None else spare.last_error or InvalidTransition()
        _fail(operation, [spare_item], why)
    return True


def advance_replace(operation_id: int) -> bool:
    """Walk a replace until its spare item is settled. A step that queued a VM's start
    queued the next look too; True while a VM is still on its way (the task,
    ``clusters.tasks.advance_replace``, looks again shortly)."""
    with transaction.atomic():
        operation = (
            Operation.objects.select_for_update()
            .filter(pk=operation_id, kind=Operation.Kind.REPLACE)
            .first()
        )
        if operation is None:
            return False
        moved = _step(operation, actor_of(operation))
        return not moved and operation.items.filter(status=ItemStatus.PENDING).exists()


def walk_stale() -> None:
    """The beat's look at open replaces whose walk is gone (a worker killed between two
    steps, a lost message): each is moved on from what its items and VMs show, as
    ``advance_replace`` does; a step that starts the spare queues the walk again."""
    for operation_id in (
        Operation.objects.open().filter(kind=Operation.Kind.REPLACE).values_list("pk", flat=True)
    ):
        advance_replace(operation_id)
