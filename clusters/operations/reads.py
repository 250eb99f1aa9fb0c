"""What the pages and the API read about operations and attach candidates."""

from clusters import services
from clusters.models import Operation, OperationQuerySet, VirtualCluster
from portal.foundation.errors import RuleViolation
from portal.foundation.kernel import Actor, permission_refusal
from portal.iam.permissions import Perm
from vms.models import VirtualMachine


def attach_candidates(
    user: Actor, cluster: VirtualCluster
) -> list[tuple[VirtualMachine, RuleViolation | None]]:
    """The project's live VMs the user may read, each with the refusal an attach to
    ``cluster`` would give them now (None: eligible), eligible first, then by name."""
    vms = (
        VirtualMachine.objects.restrict(user, Perm.VM_READ)
        .alive()
        .filter(project_id=cluster.project_id)
        .exclude(cluster=cluster)
        .select_related("cluster", "zone", "instance_type")
        .order_by("name", "pk")
    )
    pairs = [
        (vm, permission_refusal(user, Perm.VM_UPDATE, vm) or services.attach_refusal(vm, cluster))
        for vm in vms
    ]
    return sorted(pairs, key=lambda pair: pair[1] is not None)


# The kinds whose items are VMs acted on one by one, by the VM rules and permissions: a role
# that may read VMs but not clusters still follows (and ``--wait``s on) its own VM changes.
VM_KINDS = (
    Operation.Kind.START_VM,
    Operation.Kind.STOP_VM,
    Operation.Kind.DELETE_VM,
    Operation.Kind.CREATE_VMS,
    Operation.Kind.RENAME_VM,
)


def visible_operations(user: Actor) -> "OperationQuerySet":
    """Operations in the user's projects, newest first: every kind where they may read
    clusters, the VM kinds where they may read VMs."""
    by_cluster = Operation.objects.restrict(user, Perm.CLUSTER_READ)
    by_vm = Operation.objects.restrict(user, Perm.VM_READ).filter(kind__in=VM_KINDS)
    visible: OperationQuerySet = (by_cluster | by_vm).order_by("-created_at", "-id")
    return visible
