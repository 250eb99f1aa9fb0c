"""Starts and stops fanned out to workers: ``run_items`` runs each item's single-VM
action, ``watch`` marks items as their VMs settle and finishes the operation (stopping the
cluster last for ``stop_cluster_with_members``), ``watch_stale`` picks up lost watchers.
The tasks that call them are in ``clusters.tasks``; this module queues them by name."""

from collections.abc import Sequence
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from clusters import services
from clusters.items import settle_item
from clusters.models import (
    STOPPABLE,
    TRANSITIONAL,
    ClusterStatus,
    Operation,
    OperationItem,
    VirtualCluster,
)
from clusters.operations.internal import (
    CHUNK,
    ITEM_ACTIONS,
    ItemStatus,
    add_item,
    cluster_frame,
    cluster_operation,
    finish_operation,
    target_ids,
    vm_refusal,
    vm_update_frame,
)
from portal.foundation.broker import publish
from portal.foundation.errors import (
    ClusterNotRunning,
    InvalidTransition,
    NotMember,
    PermissionRequired,
    RuleViolation,
    TargetsRequired,
    TransitionTimedOut,
    VmNotFound,
)
from portal.foundation.kernel import Actor, id_for_lookup, permission_refusal
from portal.iam.permissions import Perm
from vms.models import VM_STARTABLE, VM_STOPPABLE, VM_TRANSITIONAL, VirtualMachine, VmStatus

# The tasks (``clusters.tasks``) that wrap this module's work, by name.
RUN_ITEMS, WATCH = "clusters.tasks.run_items", "clusters.tasks.watch"


def _fan_out(operation: Operation) -> None:
    """Queue the items' work in chunks once the operation commits; the last chunk queues
    the watcher after the work it started (so it looks after, not before, those steps)."""
    positions = list(operation.items.order_by("position").values_list("position", flat=True))
    if not positions:
        transaction.on_commit(lambda: publish(WATCH, operation.pk))
    for start in range(0, len(positions), CHUNK):
        chunk = positions[start : start + CHUNK]
        last = start + CHUNK >= len(positions)
        transaction.on_commit(partial(publish, RUN_ITEMS, operation.pk, chunk, last))


# The members an action takes when none are named: those it can act on.
MEMBERS_WANTED: dict[str, frozenset[str]] = {
    Operation.Kind.START_MEMBERS: VM_STARTABLE,
    Operation.Kind.STOP_MEMBERS: VM_STOPPABLE,
}
VmIds = Sequence[object] | None
Idempotency = tuple[str, ...] | None


def _member_operation(
    kind: str, cluster_id: object, vm_ids: VmIds, actor: Actor, idempotency: Idempotency
) -> Operation:
    """Start or stop members: who may not update the project's VMs is refused whole, before
    any item is made (one refusal, not one per member), whatever targets were named."""
    wanted = MEMBERS_WANTED[kind]
    with vm_update_frame(f"operation.{kind}", actor, cluster_id) as (att, cluster):
        if kind == Operation.Kind.START_MEMBERS and cluster.status != ClusterStatus.RUNNING:
            raise ClusterNotRunning()  # docs/rules.md#member-operations: the whole request
        members = cluster.members.order_by("name", "pk")
        targets: list[VirtualMachine | None]  # None: an id that names no VM (refused below)
        if vm_ids is None:
            targets = list(members.filter(status__in=wanted))
        else:
            ids = target_ids(vm_ids)
            by_id = {vm.pk: vm for vm in VirtualMachine.objects.filter(pk__in=ids)}
            targets = [by_id.get(vm_id) for vm_id in ids]
        if not targets:
            raise TargetsRequired()
        operation = cluster_operation(kind, cluster, actor=actor, idempotency=idempotency)
        items = []
        for position, vm in enumerate(targets):
            refusal = vm_refusal(actor, vm, Perm.VM_UPDATE)
            if refusal is None and vm is not None and vm.cluster_id != cluster.pk:
                refusal = NotMember()
            shown = vm if not isinstance(refusal, VmNotFound) else None
            name = shown.name if shown is not None else str(vm_ids[position] if vm_ids else "")
            items.append(add_item(operation, position, shown, refusal, name=name))
        OperationItem.objects.bulk_create(items)
        att.notice("operation_queued", total=len(items))
        _fan_out(operation)
    return operation


def start_members(
    cluster_id: object, *, actor: Actor, vm_ids: VmIds = None, idempotency: Idempotency = None
) -> Operation:
    """멤버 모두 시작 (or the selected ones): each member through ``start_vm``."""
    return _member_operation(Operation.Kind.START_MEMBERS, cluster_id, vm_ids, actor, idempotency)


def stop_members(
    cluster_id: object, *, actor: Actor, vm_ids: VmIds = None, idempotency: Idempotency = None
) -> Operation:
    """멤버 모두 중지 (or the selected ones): each member through ``stop_vm``."""
    return _member_operation(Operation.Kind.STOP_MEMBERS, cluster_id, vm_ids, actor, idempotency)


def stop_cluster_with_members(
    cluster_id: object, *, actor: Actor, idempotency: tuple[str, ...] | None = None
) -> Operation:
    """클러스터 중지 with 멤버 가상머신도 함께 중지: stop the running members, then (when all
    are 중지됨) the cluster through ``stop_cluster``, whose rule still decides."""
    frame = cluster_frame("operation.stop_cluster", actor, cluster_id, Perm.CLUSTER_UPDATE)
    with frame as (att, cluster):
        if cluster.status not in STOPPABLE:
            raise InvalidTransition()
        operation = cluster_operation(
            Operation.Kind.STOP_CLUSTER, cluster, actor=actor, idempotency=idempotency
        )
        active = list(cluster.members.exclude(status=VmStatus.STOPPED).order_by("name", "pk"))
        items = []
        for position, vm in enumerate(active):
            refusal = permission_refusal(actor, Perm.VM_UPDATE, vm)
            item = add_item(operation, position, vm, refusal)
            if vm.status in VM_TRANSITIONAL and refusal is None:
                item.started_at = timezone.now()  # already on its way: just wait for it
            items.append(item)
        OperationItem.objects.bulk_create(items)
        att.notice("operation_queued", total=len(items))
        _fan_out(operation)
    return operation


def actor_of(operation: Operation) -> Actor:
    """The user an operation acts as; a deleted user acts as nobody (never as the system)."""
    if operation.actor_id is None:
        return None
    return get_user_model().objects.filter(pk=operation.actor_id, is_active=True).first()


def run_items(operation_id: int, positions: list[int], then_watch: bool = True) -> None:
    """Run the single-VM action of each item at ``positions`` (each audited by its service).

    Idempotent: an item already started or finished is skipped.
    """
    operation = Operation.objects.filter(pk=operation_id).first()
    if operation is None or operation.done:
        return
    action, _goal = ITEM_ACTIONS[operation.kind]
    actor = actor_of(operation)
    pending = operation.items.filter(
        position__in=positions, status=ItemStatus.PENDING, started_at__isnull=True
    )
    for item in pending.order_by("position"):
        try:
            if actor is None:
                raise PermissionRequired(Perm.VM_UPDATE)
            if item.vm_id is None:
                raise VmNotFound()
            action(item.vm_id, actor=actor)
        except RuleViolation as refusal:
            item.status, item.finished_at = ItemStatus.FAILED, timezone.now()
            item.set_error(refusal)
            item.save(update_fields=["status", "finished_at", "error_code", "error_params"])
        else:
            # Only when it was taken: the VM's own step may have settled the item already.
            item.started_at = timezone.now()
            item.save(update_fields=["started_at"])
    if then_watch:
        # After commit, so that it follows the steps the actions above queued.
        transaction.on_commit(lambda: publish(WATCH, operation_id))


def _settle_items(operation: Operation, goal: str) -> None:
    """Mark started items whose VM has settled: at ``goal`` 성공, elsewhere 실패 with the
    VM's own error (or the transition's)."""
    started = operation.items.filter(status=ItemStatus.PENDING, started_at__isnull=False)
    for item in started.select_related("vm"):
        settle_item(item, item.vm, goal)


# The kinds this module finishes (validation and replace keep their own books).
SETTLED_HERE = frozenset(ITEM_ACTIONS) | {
    Operation.Kind.START_CLUSTER,
    Operation.Kind.CREATE_CLUSTER,
}


def _settle(operation: Operation) -> bool:
    """Bring ``operation`` forward from what its targets show now; True once it is done."""
    if operation.kind in ITEM_ACTIONS:
        _settle_items(operation, ITEM_ACTIONS[operation.kind][1])
        if operation.items.filter(status=ItemStatus.PENDING).exists():
            return False
        error = None
        if operation.kind == Operation.Kind.STOP_CLUSTER:
            failed = operation.items.filter(status=ItemStatus.FAILED).first()
            error = failed.last_error if failed is not None else None
            if error is None:
                try:
                    services.stop_cluster(operation.cluster_id, actor=actor_of(operation))
                except RuleViolation as refusal:
                    error = refusal
        finish_operation(operation, error)
        return True
    cluster = VirtualCluster.objects.filter(pk=id_for_lookup(operation.cluster_id)).first()
    if cluster is not None and cluster.status in TRANSITIONAL:
        return False
    finish_operation(operation, cluster.last_error if cluster is not None else None)
    return True


def watch(operation_id: int) -> bool:
    """Settle an operation's items as their VMs settle; True while it is still open (its
    task looks again shortly, until the transition timeout; then ``watch_stale``)."""
    operation = Operation.objects.filter(pk=operation_id).first()
    if operation is None or operation.done:
        return False
    with transaction.atomic():
        locked = Operation.objects.select_for_update().get(pk=operation_id)
        return not (locked.done or _settle(locked))


def watch_stale() -> None:
    """The beat's look at open operations whose watcher is gone (a dead worker, a lost
    message): settle them; items still waiting past twice the transition timeout fail."""
    cutoff = timezone.now() - timedelta(seconds=2 * settings.TRANSITION_TIMEOUT_SECONDS)
    mine = Operation.objects.open().filter(kind__in=SETTLED_HERE)
    for operation_id in mine.values_list("pk", flat=True):
        with transaction.atomic():
            operation = Operation.objects.select_for_update().get(pk=operation_id)
            if operation.done or _settle(operation) or operation.created_at >= cutoff:
                continue
            for item in operation.items.filter(status=ItemStatus.PENDING):
                item.status, item.finished_at = ItemStatus.FAILED, timezone.now()
                item.set_error(TransitionTimedOut())
                item.save(update_fields=["status", "finished_at", "error_code", "error_params"])
            _settle(operation)
