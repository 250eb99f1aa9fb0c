"""Attach, detach and create-many: done in the request, one transaction, rows locked in
the fixed order, an item and an audit event per VM."""

from collections.abc import Callable, Iterable, Sequence
from functools import partial

from clusters import services
from clusters.holds import hold_refusal
from clusters.locking import lock_cluster, lock_members
from clusters.models import (
    ClusterStatus,
    Operation,
    OperationItem,
    VirtualCluster,
)
from clusters.operations.internal import (
    MAX_CREATE,
    add_item,
    cluster_frame,
    cluster_operation,
    finish_operation,
    new_operation,
    require_vm_update,
    succeed_item,
    target_ids,
    vm_refusal,
)
from portal.catalog.models import InstanceType, Zone
from portal.foundation.audit import Attempt, attempt, build_event, record_many, require_perm
from portal.foundation.errors import (
    CountInvalid,
    NotMember,
    RuleViolation,
    VmNameTaken,
    VmNotFound,
)
from portal.foundation.kernel import Actor, id_for_lookup, parse_id, raise_if, validate_name
from portal.iam import ssh_keys
from portal.iam.permissions import Perm
from portal.models import AuditEvent, Project
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus


class _Books:
    """The items and audit events of a membership change, one per VM, written at the end."""

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.items: list[OperationItem] = []
        self.events: list[AuditEvent] = []

    def add(
        self,
        position: int,
        vm_id: object,
        vm: VirtualMachine | None,
        refusal: RuleViolation | None,
        event: Attempt,
    ) -> None:
        item = add_item(self.operation, position, vm, refusal, name=str(vm_id))
        self.items.append(item if refusal is not None else succeed_item(item))
        outcome = AuditEvent.Outcome.REFUSED if refusal else AuditEvent.Outcome.SUCCEEDED
        self.events.append(build_event(event, outcome, refusal))

    def write(self) -> None:
        OperationItem.objects.bulk_create(self.items)
        record_many(self.events)


def _attach_each(
    operation: Operation, cluster: VirtualCluster, vm_ids: list[int], actor: Actor
) -> None:
    """Attach each VM by the attach rule and write; an item and an audit event per VM."""
    vms = {
        vm.pk: vm
        for vm in VirtualMachine.objects.select_for_update().filter(pk__in=vm_ids).order_by("pk")
    }
    members = cluster.members.count() if cluster.status == ClusterStatus.RUNNING else 0
    books = _Books(operation)
    for position, vm_id in enumerate(vm_ids):
        vm = vms.get(vm_id)
        att = Attempt(action="vm.attach", actor=actor, target_type="vm", target_id=vm_id)
        refusal = vm_refusal(actor, vm, Perm.VM_UPDATE)
        visible = not isinstance(refusal, VmNotFound)
        if visible and vm is not None:  # (a missing VM is refused as not found)
            att.about(vm)
            if vm.project_id == cluster.project_id:
                att.message, att.cluster_id = cluster.name, cluster.pk
        if refusal is None and vm is not None:
            refusal = services.attach_refusal(vm, cluster) or hold_refusal(vm)
        if refusal is None:
            refusal = services.reserve_node(cluster, members)
        if refusal is None and vm is not None:
            services.join(vm, cluster)
            members += 1
        books.add(position, vm_id, vm if visible else None, refusal, att)
    books.write()


def _detach_each(
    operation: Operation, cluster: VirtualCluster, ids: list[int], actor: Actor
) -> None:
    """Detach each member by the detach rule, counting the members left as it goes."""
    members = {vm.pk: vm for vm in lock_members(cluster)}
    others = {
        vm.pk: vm for vm in VirtualMachine.objects.filter(pk__in=ids).exclude(cluster=cluster)
    }
    count = len(members)
    books = _Books(operation)
    for position, vm_id in enumerate(ids):
        vm = members.get(vm_id) or others.get(vm_id)
        evt = Attempt(action="vm.detach", actor=actor, target_type="vm", target_id=vm_id)
        refusal = vm_refusal(actor, vm, Perm.VM_UPDATE)
        visible = not isinstance(refusal, VmNotFound)
        if visible:
            evt.about(vm)
        if refusal is None and vm_id not in members:
            refusal = NotMember()
        if refusal is None and vm is not None:
            evt.message, evt.cluster_id = cluster.name, cluster.pk
            refusal = services.detach_refusal(vm, cluster, services.MemberStates(count=count))
        if refusal is None and vm is not None:
            services.leave(vm)
            count -= 1
        books.add(position, vm_id, vm if visible else None, refusal, evt)
    books.write()


def _membership_operation(
    kind: str,
    each: Callable[[Operation, VirtualCluster, list[int], Actor], None],
    cluster_id: object,
    vm_ids: Iterable[object] | None,
    *,
    actor: Actor,
    idempotency: tuple[str, ...] | None = None,
) -> Operation:
    """The frame of attach_many and detach_many: the targets, the cluster locked (it must be
    readable), the operation, ``each(operation, cluster, ids, actor)``, its end and its audit.
    Who may not update the project's VMs is refused whole, before the targets are even read
    (one refusal, one audit row: every item would say the same)."""
    require_vm_update(f"operation.{kind}", actor, cluster_id)
    ids = target_ids(vm_ids)
    with cluster_frame(f"operation.{kind}", actor, cluster_id, Perm.VM_UPDATE) as (att, cluster):
        operation = cluster_operation(kind, cluster, actor=actor, idempotency=idempotency)
        each(operation, cluster, ids, actor)
        finish_operation(operation)
        att.items_done(len(ids), operation.failed)
    return operation


# Attach many VMs to a cluster (가상머신 연결): one item per VM, done on return.
attach_many = partial(_membership_operation, Operation.Kind.ATTACH, _attach_each)
# Detach many members (분리): one item per VM, done on return.
detach_many = partial(_membership_operation, Operation.Kind.DETACH, _detach_each)


def require_create_vms(actor: Actor, project: Project, name: str | None = "") -> None:
    """Who may not create VMs in ``project`` is refused (and audited as the create) before
    the request is read: the create's first check, which the console asks before its form."""
    require_perm("vm.create", actor, Perm.VM_CREATE, project, target_type="vm", target_name=name)


def _joining_refusal(
    project: Project,
    name: str,
    cluster: VirtualCluster,
    zone_id: object,
    instance_type_id: object,
    billing_type: str,
    disaster_recovery: bool,
) -> RuleViolation | None:
    """What would refuse the VMs about to be made as members of ``cluster``, asked before
    any is made: the create's own rules first, then the attach rule itself
    (``services.attach_refusal``: spot/DR, zone, type …) on a VM as it would be created, so
    the request is refused whole and nothing billable is left behind."""
    zone = Zone.objects.filter(pk=id_for_lookup(zone_id)).first()
    instance_type = InstanceType.objects.filter(pk=id_for_lookup(instance_type_id)).first()
    refusal = vm_services.create_refusal(project, name, zone, instance_type, billing_type)
    if refusal is not None:
        return refusal
    future = VirtualMachine(
        project=project,
        zone=zone,
        instance_type=instance_type,
        billing_type=billing_type,
        disaster_recovery=bool(disaster_recovery),
        status=VmStatus.STOPPED,
    )
    return services.attach_refusal(future, cluster)


def create_vms(
    *,
    actor: Actor,
    project: Project,
    name: str | None,
    count: object,
    zone_id: object,
    instance_type_id: object,
    billing_type: str,
    disaster_recovery: bool = False,
    cluster_id: object | None = None,
    ssh_key_ids: Sequence[object] | None = None,
    idempotency: tuple[str, ...] | None = None,
) -> Operation:
    """Create ``count`` stopped VMs (``<name>-01`` … when more than one), all or none, each
    carrying the SSH keys ``ssh_key_ids`` names, then attach each to ``cluster_id`` if given
    (an item per VM: created, and attached). With a cluster, the attach rule is asked first:
    a VM it would refuse is never created; a key not found refuses them all before any."""
    require_create_vms(actor, project, name)
    number = parse_id(count)
    if number is None or number > MAX_CREATE:
        raise CountInvalid(max=MAX_CREATE)
    base = validate_name(name)
    names = [base] if number == 1 else [f"{base}-{i:02d}" for i in range(1, number + 1)]
    for each in names:
        validate_name(each)  # the suffix may make it too long
    with attempt("operation.create_vms", actor=actor, target_type="vm") as att:
        att.project_id, att.target_name = project.pk, base
        cluster = None
        if cluster_id not in (None, ""):
            # Each new VM is attached: who may not update VMs is refused before any is made.
            cluster = lock_cluster(cluster_id, actor, Perm.VM_UPDATE)
            att.cluster_id = cluster.pk
        if VirtualMachine.objects.alive().filter(project=project, name__in=names).exists():
            raise VmNameTaken()
        ssh_keys.chosen_keys(actor, project, ssh_key_ids)
        if cluster is not None:
            raise_if(
                _joining_refusal(
                    project,
                    names[0],
                    cluster,
                    zone_id,
                    instance_type_id,
                    billing_type,
                    disaster_recovery,
                )
            )
        operation = new_operation(
            Operation.Kind.CREATE_VMS,
            actor=actor,
            project_id=project.pk,
            cluster=cluster,
            idempotency=idempotency,
        )
        created = [
            vm_services.create_vm(
                actor=actor,
                project=project,
                name=each,
                zone_id=zone_id,
                instance_type_id=instance_type_id,
                billing_type=billing_type,
                disaster_recovery=disaster_recovery,
                ssh_key_ids=ssh_key_ids,
            )
            for each in names
        ]
        if cluster is not None:
            _attach_each(operation, cluster, [vm.pk for vm in created], actor)
        else:
            OperationItem.objects.bulk_create(
                [succeed_item(add_item(operation, i, vm)) for i, vm in enumerate(created)]
            )
        finish_operation(operation)
        att.items_done(len(names), operation.failed)
    return operation
