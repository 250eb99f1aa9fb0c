"""The invariants of docs/rules.md over the whole database, shared by the concurrency and the
fault suites: what must hold once every transition has settled."""

from collections import Counter

from clusters.models import STABLE, ClusterStatus, VirtualCluster
from portal.compute.models import SimulatorAllocation
from vms.models import VM_ACTIVE, VM_TRANSITIONAL, BillingType, VirtualMachine


def structural_problems():
    """Every broken rule, as sentences (an empty list when all is well)."""
    problems = []
    clusters = {c.pk: c for c in VirtualCluster.objects.all()}
    vms = list(VirtualMachine.objects.all())
    members = Counter(vm.cluster_id for vm in vms if vm.cluster_id)
    for vm in vms:
        if vm.status in VM_TRANSITIONAL:
            problems.append(f"VM {vm.name} left in transition {vm.status}")
        if vm.cluster_id is None:
            if vm.fabric_address:
                problems.append(f"VM {vm.name} has a fabric address outside any cluster")
            continue
        cluster = clusters[vm.cluster_id]
        if cluster.status == ClusterStatus.DELETED:
            problems.append(f"VM {vm.name} is a member of deleted cluster {cluster.name}")
        if vm.status in VM_ACTIVE and cluster.status != ClusterStatus.RUNNING:
            problems.append(f"VM {vm.name} is {vm.status} in {cluster.status} {cluster.name}")
        if (vm.zone_id, vm.instance_type_id, vm.project_id) != (
            cluster.zone_id,
            cluster.instance_type_id,
            cluster.project_id,
        ):
            problems.append(f"VM {vm.name} does not match cluster {cluster.name}")
        if vm.billing_type == BillingType.SPOT or vm.disaster_recovery:
            problems.append(f"spot/DR VM {vm.name} is a member")
        if vm.fabric_address and cluster.status != ClusterStatus.RUNNING:
            problems.append(f"VM {vm.name} keeps a fabric address in {cluster.status}")
    allocations = {a.cluster_id: a for a in SimulatorAllocation.objects.all()}
    for cluster in clusters.values():
        if cluster.status not in STABLE:
            problems.append(f"cluster {cluster.name} left in transition {cluster.status}")
        if cluster.status == ClusterStatus.RUNNING and members[cluster.pk] < 2:
            problems.append(f"RUNNING cluster {cluster.name} has {members[cluster.pk]} members")
        allocation = allocations.get(cluster.pk)
        if cluster.status == ClusterStatus.RUNNING and (
            allocation is None or not allocation.configured
        ):
            problems.append(f"RUNNING cluster {cluster.name} holds no configured fabric")
        if cluster.status != ClusterStatus.RUNNING and allocation is not None:
            problems.append(f"{cluster.status} cluster {cluster.name} still holds its fabric")
    return problems
