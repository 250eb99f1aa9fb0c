"""Single actions recorded as an Operation (the API answers every change with one)."""

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters import services
from clusters.models import (
    Operation,
    OperationItem,
    VirtualCluster,
)
from clusters.operations.common import (
    K,
    _finish,
    _new_operation,
    _succeed,
)
from clusters.operations.fanout import stop_cluster_with_members, watch
from portal.broker import publish
from portal.errors import (
    ClusterNotFound,
    RuleViolation,
    VmNotFound,
)
from portal.kernel import Actor, id_for_lookup
from portal.models import Project
from portal.permissions import Perm
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus


def _single(
    kind: str,
    fn: Callable[[], object],
    *,
    actor: Actor,
    project_id: int,
    cluster: VirtualCluster | None = None,
    vm: VirtualMachine | None = None,
    idempotency: tuple[str, ...] | None = None,
    watch_it: bool,
) -> tuple[Operation, Any]:
    """Claim the operation (and its idempotency key) first, in its own transaction, then run
    the action through its service (which audits it); a refusal removes the claim."""
    operation = _new_operation(
        kind, actor=actor, project_id=project_id, cluster=cluster, idempotency=idempotency
    )
    item = None
    if vm is not None:
        item = OperationItem.objects.create(
            operation=operation, position=0, vm=vm, target_name=vm.name
        )
    try:
        result = fn()
    except RuleViolation:
        operation.delete()
        raise
    if item is not None:
        item.started_at = timezone.now()
        item.save(update_fields=["started_at"])
    if watch_it:
        transaction.on_commit(lambda: publish(watch, operation.pk))
    else:
        if item is not None:
            _succeed(item).save(update_fields=["status", "finished_at"])
        _finish(operation)
    return operation, result


def _readable_cluster(cluster_id: object, actor: Actor) -> VirtualCluster:
    cluster: VirtualCluster | None = VirtualCluster.objects.filter(
        pk=id_for_lookup(cluster_id)
    ).first()
    if cluster is None or (actor is not None and not actor.has_perm(Perm.CLUSTER_READ, cluster)):
        raise ClusterNotFound()
    return cluster


def _readable_vm(vm_id: object, actor: Actor) -> VirtualMachine:
    vm: VirtualMachine | None = (
        VirtualMachine.objects.filter(pk=id_for_lookup(vm_id))
        .exclude(status=VmStatus.DELETED)
        .first()
    )
    if vm is None or (actor is not None and not actor.has_perm(Perm.VM_READ, vm)):
        raise VmNotFound()
    return vm


def create_cluster_op(
    *, actor: Actor, project: Project, idempotency: tuple[str, ...] | None = None, **fields: Any
) -> tuple[Operation, VirtualCluster]:
    """``services.create_cluster`` as an Operation, done when the cluster is 미할당."""
    operation = _new_operation(
        K.CREATE_CLUSTER, actor=actor, project_id=project.pk, idempotency=idempotency
    )
    try:
        cluster = services.create_cluster(actor=actor, project=project, **fields)
    except RuleViolation:
        operation.delete()
        raise
    operation.cluster = cluster
    operation.save(update_fields=["cluster"])
    transaction.on_commit(lambda: publish(watch, operation.pk))
    return operation, cluster


def _cluster_op(
    kind: str,
    service: Callable[..., object],
    cluster_id: object,
    *,
    actor: Actor,
    idempotency: tuple[str, ...] | None,
    watch_it: bool,
) -> tuple[Operation, Any]:
    cluster = _readable_cluster(cluster_id, actor)
    return _single(
        kind,
        lambda: service(cluster.pk, actor=actor),
        actor=actor,
        project_id=cluster.project_id,
        cluster=cluster,
        idempotency=idempotency,
        watch_it=watch_it,
    )


def start_cluster_op(
    cluster_id: object, *, actor: Actor, idempotency: tuple[str, ...] | None = None
) -> tuple[Operation, Any]:
    """Done when the cluster is 실행중, or back where it was with the reason as its error."""
    return _cluster_op(
        K.START_CLUSTER,
        services.start_cluster,
        cluster_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=True,
    )


def stop_cluster_op(
    cluster_id: object,
    *,
    actor: Actor,
    stop_members: bool = False,
    idempotency: tuple[str, ...] | None = None,
) -> tuple[Operation, Any]:
    """The plain stop (done at once), or with ``stop_members`` the members first."""
    if stop_members:
        operation = stop_cluster_with_members(cluster_id, actor=actor, idempotency=idempotency)
        return operation, operation.cluster
    return _cluster_op(
        K.STOP_CLUSTER,
        services.stop_cluster,
        cluster_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=False,
    )


def delete_cluster_op(
    cluster_id: object, *, actor: Actor, idempotency: tuple[str, ...] | None = None
) -> tuple[Operation, Any]:
    return _cluster_op(
        K.DELETE_CLUSTER,
        services.delete_cluster,
        cluster_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=False,
    )


def _vm_op(
    kind: str,
    fn: Callable[..., object],
    vm_id: object,
    *,
    actor: Actor,
    idempotency: tuple[str, ...] | None,
    watch_it: bool,
) -> tuple[Operation, Any]:
    vm = _readable_vm(vm_id, actor)
    return _single(
        kind,
        lambda: fn(vm.pk, actor=actor),
        actor=actor,
        project_id=vm.project_id,
        cluster=vm.cluster,
        vm=vm,
        idempotency=idempotency,
        watch_it=watch_it,
    )


def start_vm_op(
    vm_id: object, *, actor: Actor, idempotency: tuple[str, ...] | None = None
) -> tuple[Operation, Any]:
    """Done when the VM is 실행중 (성공) or back to 중지됨 with its error (실패)."""
    return _vm_op(
        K.START_VM, vm_services.start_vm, vm_id, actor=actor, idempotency=idempotency, watch_it=True
    )


def stop_vm_op(
    vm_id: object, *, actor: Actor, idempotency: tuple[str, ...] | None = None
) -> tuple[Operation, Any]:
    return _vm_op(
        K.STOP_VM, vm_services.stop_vm, vm_id, actor=actor, idempotency=idempotency, watch_it=True
    )


def delete_vm_op(
    vm_id: object, *, actor: Actor, idempotency: tuple[str, ...] | None = None
) -> tuple[Operation, Any]:
    return _vm_op(
        K.DELETE_VM,
        vm_services.delete_vm,
        vm_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=False,
    )
