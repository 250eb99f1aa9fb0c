"""What the pages and the API read about operations and attach candidates."""

from clusters import services
from clusters.models import Operation
from portal.errors import RuleViolation
from portal.kernel import permission_refusal
from portal.permissions import Perm
from vms.models import VirtualMachine


def attach_candidates(user, cluster) -> list[tuple[VirtualMachine, RuleViolation | None]]:
    """The project's live VMs the user may read, each with the refusal an attach to
    ``cluster`` would give them now (None: eligible), eligible first, then by name."""
    vms = (
        VirtualMachine.objects.restrict(user, Perm.VM_READ)
        .alive()
        .filter(project_id=cluster.project_id)
        .exclude(cluster=cluster)
        .select_related("cluster")
        .order_by("name", "pk")
    )
    pairs = [
        (vm, permission_refusal(user, Perm.VM_UPDATE, vm) or services.attach_refusal(vm, cluster))
        for vm in vms
    ]
    return sorted(pairs, key=lambda pair: pair[1] is not None)


def visible_operations(user):
    """Operations in the user's projects (those where they may read clusters), newest first."""
    return Operation.objects.restrict(user, Perm.CLUSTER_READ).order_by("-created_at", "-id")
