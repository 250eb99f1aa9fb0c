"""What every kind of operation shares: targets, the record, its items, its end."""

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

from django.utils import timezone

from clusters.items import ITEM_GOALS
from clusters.locking import lock_cluster
from clusters.models import (
    Operation,
    OperationItem,
    VirtualCluster,
)
from portal.foundation.audit import Attempt, attempt, require_perm
from portal.foundation.errors import (
    IdempotencyConflict,
    RuleViolation,
    TargetsRequired,
    TooManyTargets,
    VmNotFound,
)
from portal.foundation.kernel import (
    Actor,
    id_for_lookup,
    parse_id,
    permission_refusal,
    recorded_user,
    save_unique,
)
from portal.iam.permissions import Perm
from portal.models import readable
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

ItemStatus = OperationItem.Status
MAX_TARGETS = 1024
MAX_CREATE = 64
CHUNK = 32  # items per worker task: 256 members fan out over 8 tasks
WATCH_EVERY = 1.0
# What each fanned-out kind runs per item, and the VM status that means it succeeded.
ITEM_ACTIONS: dict[str, tuple[Callable[..., VirtualMachine], str]] = {
    kind: (vm_services.start_vm if goal == VmStatus.RUNNING else vm_services.stop_vm, goal)
    for kind, goal in ITEM_GOALS.items()
}


def target_ids(vm_ids: Iterable[object] | None) -> list[int]:
    """The VM ids of a request, in order, each once; refused whole if any is not an id."""
    if vm_ids is None or isinstance(vm_ids, str | bytes | dict):
        raise TargetsRequired()
    parsed = [parse_id(value) for value in vm_ids]
    ids = [value for value in parsed if value is not None]
    if not ids or len(ids) < len(parsed):
        raise TargetsRequired()
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_TARGETS:
        raise TooManyTargets(max=MAX_TARGETS)
    return ids


def new_operation(
    kind: str,
    *,
    actor: Actor,
    project_id: int,
    cluster: VirtualCluster | None = None,
    idempotency: tuple[str, ...] | None = None,
) -> Operation:
    """``idempotency``: (key, request hash[, scope]) — the scope is the method and route."""
    key, request_hash, *scope = idempotency or ("", "")
    operation = Operation(
        kind=kind,
        project_id=project_id,
        cluster=cluster,
        actor=recorded_user(actor),
        idempotency_key=key,
        idempotency_scope=scope[0] if scope else "",
        request_hash=request_hash,
    )
    # The same key, sent twice at once: the other one holds it.
    save_unique(operation, IdempotencyConflict)
    return operation


def cluster_operation(
    kind: str,
    cluster: VirtualCluster,
    *,
    actor: Actor,
    idempotency: tuple[str, ...] | None = None,
) -> Operation:
    """An operation on ``cluster``, in the cluster's project."""
    return new_operation(
        kind, actor=actor, project_id=cluster.project_id, cluster=cluster, idempotency=idempotency
    )


def add_item(
    operation: Operation,
    position: int,
    vm: VirtualMachine | None,
    error: RuleViolation | None = None,
    *,
    name: str = "",
) -> OperationItem:
    item = OperationItem(
        operation=operation,
        position=position,
        vm=vm,
        target_name=(vm.name if vm is not None else name)[:100],
        status=ItemStatus.FAILED if error is not None else ItemStatus.PENDING,
        finished_at=timezone.now() if error is not None else None,
    )
    item.set_error(error)
    return item


def succeed_item(item: OperationItem) -> OperationItem:
    item.status, item.finished_at = ItemStatus.SUCCEEDED, timezone.now()
    return item


def vm_refusal(actor: Actor, vm: VirtualMachine | None, permission: str) -> RuleViolation | None:
    """Who may not touch ``vm`` is refused as the single action would be: not found, then
    the permission."""
    if not readable(actor, Perm.VM_READ, VirtualMachine).shows(vm):
        return VmNotFound()
    return permission_refusal(actor, permission, vm)


def finish_operation(operation: Operation, error: RuleViolation | None = None) -> None:
    operation.finished_at = timezone.now()
    operation.set_error(error)
    operation.save(update_fields=["finished_at", "error_code", "error_params"])


def cluster_attempt(
    action: str, actor: Actor, cluster_id: object
) -> AbstractContextManager[Attempt]:
    return attempt(action, actor=actor, target_type="cluster", target_id=parse_id(cluster_id))


def require_vm_update(action: str, actor: Actor, cluster_id: object) -> None:
    """Who may read the cluster but not update its project's VMs is refused the whole
    request, up front and audited as the operation, before any target is read or any item
    made (each item would say the same). An unreadable cluster is left to the operation's
    own lookup, which refuses it as not found."""
    cluster = readable(actor, Perm.CLUSTER_READ, VirtualCluster).filter(
        pk=id_for_lookup(cluster_id)
    )
    for found in cluster:
        require_perm(action, actor, Perm.VM_UPDATE, found, target_type="cluster")


@contextmanager
def cluster_frame(
    action: str, actor: Actor, cluster_id: object, permission: str
) -> Iterator[tuple[Attempt, VirtualCluster]]:
    """An operation's frame on its cluster: audited as ``action`` under the cluster, which
    is locked for the actor holding ``permission`` on it (an unreadable one is not found)."""
    with cluster_attempt(action, actor, cluster_id) as att:
        yield att, lock_cluster(cluster_id, actor, permission, att)


@contextmanager
def vm_update_frame(
    action: str, actor: Actor, cluster_id: object
) -> Iterator[tuple[Attempt, VirtualCluster]]:
    """The frame of an operation on the cluster's VMs: ``require_vm_update`` first, then
    the cluster locked for VM UPDATE."""
    require_vm_update(action, actor, cluster_id)
    with cluster_frame(action, actor, cluster_id, Perm.VM_UPDATE) as frame:
        yield frame
