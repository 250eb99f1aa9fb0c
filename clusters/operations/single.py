"""Single actions recorded as an Operation: the console, the API and the admin all change a
cluster or a VM through these, so every change leaves the same record."""

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol

from django.db import transaction
from django.utils import timezone

from clusters import policy, services, spares
from clusters.models import Operation, OperationItem, VirtualCluster
from clusters.operations.fanout import WATCH, stop_cluster_with_members
from clusters.operations.internal import (
    finish_operation,
    new_operation,
    succeed_item,
)
from portal.foundation.audit import require_perm
from portal.foundation.broker import publish
from portal.foundation.errors import RuleViolation
from portal.foundation.kernel import Actor
from portal.iam.permissions import Perm
from portal.models import Project, readable
from vms import services as vm_services
from vms.models import VirtualMachine


def require_create_cluster(actor: Actor, project: Project, name: object = "") -> None:
    """Who may not create clusters in ``project`` is refused (and audited) before the
    request is read: the create's first check, which the console asks before its form."""
    perm = Perm.CLUSTER_CREATE
    require_perm("cluster.create", actor, perm, project, target_type="cluster", target_name=name)


def create_cluster_op(
    *, actor: Actor, project: Project, idempotency: tuple[str, ...] | None = None, **fields: Any
) -> tuple[Operation, VirtualCluster]:
    """``services.create_cluster`` as an Operation, done when the cluster is 미할당."""
    require_create_cluster(actor, project, fields.get("name"))
    operation = new_operation(
        Operation.Kind.CREATE_CLUSTER, actor=actor, project_id=project.pk, idempotency=idempotency
    )
    try:
        cluster = services.create_cluster(actor=actor, project=project, **fields)
    except RuleViolation:
        operation.delete()
        raise
    operation.cluster = cluster
    operation.save(update_fields=["cluster"])
    transaction.on_commit(lambda: publish(WATCH, operation.pk))
    return operation, cluster


Idempotency = tuple[str, ...] | None
Done = tuple[Operation, Any]

# Each one-step action: the service that does it, and whether its Operation is done only once
# the target settles (a start, a VM's stop: ``watch``) or at once.
STEPS: dict[str, tuple[Callable[..., object], bool]] = {
    # on a cluster
    Operation.Kind.START_CLUSTER: (services.start_cluster, True),
    Operation.Kind.STOP_CLUSTER: (services.stop_cluster, False),
    Operation.Kind.DELETE_CLUSTER: (services.delete_cluster, False),
    Operation.Kind.UPDATE: (services.rename_cluster, False),
    Operation.Kind.SSH_KEYS: (services.set_cluster_ssh_keys, False),
    Operation.Kind.SPARE_ADD: (spares.add_spare, False),
    Operation.Kind.SPARE_REMOVE: (spares.remove_spare, False),
    Operation.Kind.POLICY: (policy.set_policy, False),
    # on a VM
    Operation.Kind.START_VM: (vm_services.start_vm, True),
    Operation.Kind.STOP_VM: (vm_services.stop_vm, True),
    Operation.Kind.DELETE_VM: (vm_services.delete_vm, False),
    Operation.Kind.RENAME_VM: (vm_services.rename_vm, False),
    Operation.Kind.ATTACH: (services.attach_vm, False),
    Operation.Kind.DETACH: (services.detach_vm, False),
}


def _single(
    kind: str,
    target: VirtualCluster | VirtualMachine,
    *,
    actor: Actor,
    idempotency: Idempotency,
    cluster: VirtualCluster | None = None,
    **args: Any,
) -> Done:
    """Claim the operation (and its idempotency key) first, in its own transaction, then run
    ``STEPS[kind]`` on ``target`` through its service (which audits it); a refusal removes
    the claim. A VM's operation is recorded under ``cluster``, or else the VM's own."""
    service, watch_it = STEPS[kind]
    if isinstance(target, VirtualMachine):
        vm, cluster = target, cluster or target.cluster
    else:
        vm, cluster = None, target
    operation = new_operation(
        kind, actor=actor, project_id=target.project_id, cluster=cluster, idempotency=idempotency
    )
    item = None
    if vm is not None:
        item = OperationItem.objects.create(
            operation=operation, position=0, vm=vm, target_name=vm.name
        )
    try:
        result = service(target.pk, actor=actor, **args)
    except RuleViolation:
        operation.delete()
        raise
    if item is not None:
        item.started_at = timezone.now()
        item.save(update_fields=["started_at"])
    if watch_it:
        transaction.on_commit(lambda: publish(WATCH, operation.pk))
    else:
        if item is not None:
            succeed_item(item).save(update_fields=["status", "finished_at"])
        finish_operation(operation)
    return operation, result


def _cluster_op(
    kind: str, cluster_id: object, *, actor: Actor, idempotency: Idempotency = None, **args: Any
) -> Done:
    """``STEPS[kind]`` on a cluster the actor may read (else not found)."""
    cluster = readable(actor, Perm.CLUSTER_READ, VirtualCluster).get_or_404(cluster_id)
    return _single(kind, cluster, actor=actor, idempotency=idempotency, **args)


def _vm_op(
    kind: str,
    vm_id: object,
    *,
    actor: Actor,
    idempotency: Idempotency = None,
    cluster: VirtualCluster | None = None,
    **args: Any,
) -> Done:
    """``STEPS[kind]`` on a VM the actor may read (else not found)."""
    vm = readable(actor, Perm.VM_READ, VirtualMachine).get_or_404(vm_id)
    return _single(kind, vm, actor=actor, idempotency=idempotency, cluster=cluster, **args)


class StepOp(Protocol):
    """A one-step action on a cluster or a VM, by its id, recorded as an Operation."""

    def __call__(
        self, target_id: object, /, *, actor: Actor, idempotency: Idempotency = None
    ) -> Done: ...


# Done when the cluster is 실행중, or back where it was with the reason as its error.
start_cluster_op: StepOp = partial(_cluster_op, Operation.Kind.START_CLUSTER)
# Done at once: the cluster is 삭제됨, or the rule's refusal is raised.
delete_cluster_op: StepOp = partial(_cluster_op, Operation.Kind.DELETE_CLUSTER)
# Done when the VM is 실행중 (성공) or back to 중지됨 with its error (실패).
start_vm_op: StepOp = partial(_vm_op, Operation.Kind.START_VM)
# Done when the VM is 중지됨 (성공), or with its error (실패).
stop_vm_op: StepOp = partial(_vm_op, Operation.Kind.STOP_VM)
# Done at once: the VM is 삭제됨, or the rule's refusal is raised.
delete_vm_op: StepOp = partial(_vm_op, Operation.Kind.DELETE_VM)
# One VM out of its cluster by ``services.detach_vm`` (the VM page's 분리).
detach_vm_op: StepOp = partial(_vm_op, Operation.Kind.DETACH)


def stop_cluster_op(
    cluster_id: object, *, actor: Actor, stop_members: bool = False, idempotency: Idempotency = None
) -> Done:
    """The plain stop (done at once), or with ``stop_members`` the members first."""
    if stop_members:
        operation = stop_cluster_with_members(cluster_id, actor=actor, idempotency=idempotency)
        return operation, operation.cluster
    return _cluster_op(
        Operation.Kind.STOP_CLUSTER, cluster_id, actor=actor, idempotency=idempotency
    )


def rename_cluster_op(
    cluster_id: object, *, actor: Actor, name: str | None, idempotency: Idempotency = None
) -> Done:
    """``services.rename_cluster`` as an Operation, done at once."""
    return _cluster_op(
        Operation.Kind.UPDATE, cluster_id, actor=actor, idempotency=idempotency, name=name
    )


def cluster_ssh_keys_op(
    cluster_id: object,
    *,
    actor: Actor,
    ssh_key_ids: Iterable[object] | None,
    idempotency: Idempotency = None,
) -> Done:
    """``services.set_cluster_ssh_keys`` as an Operation, done at once."""
    return _cluster_op(
        Operation.Kind.SSH_KEYS,
        cluster_id,
        actor=actor,
        idempotency=idempotency,
        ssh_key_ids=ssh_key_ids,
    )


def rename_vm_op(
    vm_id: object, *, actor: Actor, name: str | None, idempotency: Idempotency = None
) -> Done:
    """``vms.services.rename_vm`` as an Operation, done at once."""
    return _vm_op(Operation.Kind.RENAME_VM, vm_id, actor=actor, idempotency=idempotency, name=name)


def attach_vm_op(
    vm_id: object, cluster_id: object, *, actor: Actor, idempotency: Idempotency = None
) -> Done:
    """One VM attached by ``services.attach_vm`` (the VM page's 클러스터 section): refused
    whole with the rule's error, as the page shows it, or an Operation done at once."""
    cluster = readable(actor, Perm.CLUSTER_READ, VirtualCluster).get_or_404(cluster_id)
    return _vm_op(
        Operation.Kind.ATTACH,
        vm_id,
        actor=actor,
        idempotency=idempotency,
        cluster=cluster,
        cluster_id=cluster_id,
    )


def spare_add_op(
    cluster_id: object, vm_id: object, *, actor: Actor, idempotency: Idempotency = None
) -> Done:
    """``spares.add_spare`` as an Operation, done at once."""
    return _cluster_op(
        Operation.Kind.SPARE_ADD, cluster_id, actor=actor, idempotency=idempotency, vm_id=vm_id
    )


def spare_remove_op(
    cluster_id: object, vm_id: object, *, actor: Actor, idempotency: Idempotency = None
) -> Done:
    """``spares.remove_spare`` as an Operation, done at once."""
    return _cluster_op(
        Operation.Kind.SPARE_REMOVE, cluster_id, actor=actor, idempotency=idempotency, vm_id=vm_id
    )


def policy_op(
    cluster_id: object, *, actor: Actor, policy: object, idempotency: Idempotency = None
) -> Done:
    """``policy.set_policy`` as an Operation, done at once."""
    return _cluster_op(
        Operation.Kind.POLICY, cluster_id, actor=actor, idempotency=idempotency, policy=policy
    )
