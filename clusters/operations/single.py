"""Single actions recorded as an Operation (the API answers every change with one)."""

from django.db import transaction
from django.utils import timezone

from clusters import services
from clusters.models import (
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
from portal.kernel import parse_id
from portal.permissions import Perm
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus


def _single(kind, fn, *, actor, project_id, cluster=None, vm=None, idempotency=None, watch_it):
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


def _readable_cluster(cluster_id, actor) -> VirtualCluster:
    cluster = VirtualCluster.objects.filter(pk=parse_id(cluster_id)).first()
    if cluster is None or (actor is not None and not actor.has_perm(Perm.CLUSTER_READ, cluster)):
        raise ClusterNotFound()
    return cluster


def _readable_vm(vm_id, actor) -> VirtualMachine:
    vm = VirtualMachine.objects.filter(pk=parse_id(vm_id)).exclude(status=VmStatus.DELETED).first()
    if vm is None or (actor is not None and not actor.has_perm(Perm.VM_READ, vm)):
        raise VmNotFound()
    return vm


def create_cluster_op(*, actor, project, idempotency=None, **fields):
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


def _cluster_op(kind, service, cluster_id, *, actor, idempotency, watch_it):
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


def start_cluster_op(cluster_id, *, actor, idempotency=None):
    """Done when the cluster is 실행중, or back where it was with the reason as its error."""
    return _cluster_op(
        K.START_CLUSTER,
        services.start_cluster,
        cluster_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=True,
    )


def stop_cluster_op(cluster_id, *, actor, stop_members=False, idempotency=None):
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


def delete_cluster_op(cluster_id, *, actor, idempotency=None):
    return _cluster_op(
        K.DELETE_CLUSTER,
        services.delete_cluster,
        cluster_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=False,
    )


def _vm_op(kind, fn, vm_id, *, actor, idempotency, watch_it):
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


def start_vm_op(vm_id, *, actor, idempotency=None):
    """Done when the VM is 실행중 (성공) or back to 중지됨 with its error (실패)."""
    return _vm_op(
        K.START_VM, vm_services.start_vm, vm_id, actor=actor, idempotency=idempotency, watch_it=True
    )


def stop_vm_op(vm_id, *, actor, idempotency=None):
    return _vm_op(
        K.STOP_VM, vm_services.stop_vm, vm_id, actor=actor, idempotency=idempotency, watch_it=True
    )


def delete_vm_op(vm_id, *, actor, idempotency=None):
    return _vm_op(
        K.DELETE_VM,
        vm_services.delete_vm,
        vm_id,
        actor=actor,
        idempotency=idempotency,
        watch_it=False,
    )
