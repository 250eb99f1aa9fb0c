"""A cluster's 예비 (docs/rules.md#spares): who may keep which VM as a spare, the hold that
keeps it for its cluster, and the 교체 that takes the best one."""

import pytest

from clusters import operations, services, spares
from clusters.models import ClusterSpare, ClusterStatus, Operation
from clusters.models.validation import Verdict
from portal.compute.models import GpuHost, Placement
from portal.foundation import errors
from portal.models import AuditEvent
from tests.validation.test_replace_spares import judge
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine, VmHealth, VmStatus


def kept(cluster):
    return sorted(ClusterSpare.objects.filter(cluster=cluster).values_list("vm__name", flat=True))


def test_a_stopped_vm_of_the_zone_and_type_becomes_a_spare_and_no_member(world):
    cluster = world.cluster()
    world.members(cluster, 2)
    vm = world.vm("spare-01")
    operation, _vm = operations.spare_add_op(cluster.pk, vm.pk, actor=world.admin)
    assert operation.kind == Operation.Kind.SPARE_ADD and operation.done
    assert kept(cluster) == ["spare-01"]
    vm.refresh_from_db()
    assert vm.cluster_id is None and vm.node_rank is None
    assert cluster.members.count() == 2
    event = AuditEvent.objects.get(action="cluster.spare_add")
    assert event.outcome == AuditEvent.Outcome.SUCCEEDED and event.message == "spare-01"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"billing_type": BillingType.SPOT}, errors.SpotOrDrVm),
        ({"disaster_recovery": True}, errors.SpotOrDrVm),
        ({"status": VmStatus.RUNNING}, errors.VmNotEligible),
        ({"health": VmHealth.ISOLATED}, errors.SpareIsolated),
    ],
)
def test_what_is_no_spare_is_refused_and_changes_nothing(world, fields, error):
    cluster = world.cluster()
    vm = world.vm("spare-01", **fields)
    with pytest.raises(error):
        spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    assert kept(cluster) == []
    assert AuditEvent.objects.get(action="cluster.spare_add").outcome == "REFUSED"


def test_other_zone_type_member_and_another_clusters_spare_are_refused(world):
    cluster, second = world.cluster(), world.cluster("second")
    (member,) = world.members(cluster, 1)
    other_zone = world.vm("b", zone=world.zone_b)
    other_type = world.vm("l", instance_type=world.l40s)
    elsewhere = world.vm("e")
    spares.add_spare(second.pk, elsewhere.pk, actor=world.admin)
    for vm, error in (
        (other_zone, errors.VmInOtherZone),
        (other_type, errors.VmOfOtherInstanceType),
        (member, errors.AlreadyMember),
        (elsewhere, errors.VmIsSpare),
    ):
        with pytest.raises(error):
            spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    assert kept(cluster) == []


def test_a_viewer_is_refused_with_the_permission_and_another_project_sees_nothing(world):
    cluster = world.cluster()
    vm = world.vm("spare-01")
    with pytest.raises(errors.PermissionRequired) as refused:
        spares.add_spare(cluster.pk, vm.pk, actor=world.users["viewer"])
    assert refused.value.params["permission"] == "Resource.VirtualCluster.UPDATE"
    with pytest.raises(errors.ClusterNotFound):
        spares.add_spare(cluster.pk, vm.pk, actor=world.users["other"])
    foreign = world.vm("foreign", project=world.other)
    with pytest.raises(errors.VmNotFound):
        spares.add_spare(cluster.pk, foreign.pk, actor=world.admin)
    assert kept(cluster) == []
    assert spares.preflight_add_spare(world.users["viewer"], cluster) is not None
    assert spares.preflight_add_spare(world.admin, cluster) is None


def test_a_spare_is_held_it_is_not_started_deleted_or_attached_until_removed(world):
    cluster, second = world.cluster(), world.cluster("second")
    vm = world.vm("spare-01")
    spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    with pytest.raises(errors.VmIsSpare):
        vm_services.start_vm(vm.pk, actor=world.admin)
    with pytest.raises(errors.VmIsSpare):
        vm_services.delete_vm(vm.pk, actor=world.admin)
    with pytest.raises(errors.VmIsSpare):
        services.attach_vm(vm.pk, second.pk, actor=world.admin)
    with pytest.raises(errors.VmIsSpare):
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    operations.attach_many(second.pk, [vm.pk], actor=world.admin)
    assert VirtualMachine.objects.get(pk=vm.pk).cluster_id is None
    operation, _vm = operations.spare_remove_op(cluster.pk, vm.pk, actor=world.admin)
    assert operation.kind == Operation.Kind.SPARE_REMOVE and kept(cluster) == []
    services.attach_vm(vm.pk, second.pk, actor=world.admin)
    assert VirtualMachine.objects.get(pk=vm.pk).cluster_id == second.pk


def test_removing_what_is_no_spare_of_this_cluster_is_refused(world):
    cluster, second = world.cluster(), world.cluster("second")
    vm = world.vm("spare-01")
    with pytest.raises(errors.NotSpare):
        spares.remove_spare(cluster.pk, vm.pk, actor=world.admin)
    spares.add_spare(second.pk, vm.pk, actor=world.admin)
    with pytest.raises(errors.NotSpare):
        spares.remove_spare(cluster.pk, vm.pk, actor=world.admin)
    assert kept(second) == ["spare-01"]


def test_a_replace_without_a_spare_named_takes_the_pools_best_at_the_members_rank(world):
    cluster = world.cluster()
    a, b, c = world.members(cluster, 3)
    first, good = world.vm("spare-first"), world.vm("spare-good")
    for vm in (first, good):
        spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    judge(world.cluster("old"), {good: Verdict.OK})
    operation = operations.replace_member(cluster.pk, b.pk, actor=world.admin)
    assert operation.done and operation.last_error is None
    good.refresh_from_db()
    assert good.cluster_id == cluster.pk and good.node_rank == 1
    assert kept(cluster) == ["spare-first"]  # the one that joined is a spare no more


def test_a_spare_judged_bad_or_isolated_is_never_taken_and_none_left_is_refused(world):
    cluster = world.cluster()
    a, b = world.members(cluster, 2)
    bad, isolated = world.vm("spare-bad"), world.vm("spare-iso")
    for vm in (bad, isolated):
        spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    judge(world.cluster("old"), {bad: Verdict.BAD})
    VirtualMachine.objects.filter(pk=isolated.pk).update(health=VmHealth.ISOLATED)
    assert spares.best_spares(cluster, a) == []
    with pytest.raises(errors.NoSpare):
        operations.replace_member(cluster.pk, a.pk, actor=world.admin)
    assert set(cluster.members.values_list("name", flat=True)) == {a.name, b.name}
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()


def test_the_spare_under_the_members_leaf_comes_first(world):
    cluster = world.cluster()
    a, b = world.members(cluster, 2)
    far, near = world.vm("spare-far"), world.vm("spare-near")
    hosts = {
        leaf: GpuHost.objects.create(
            name=f"h-{leaf}", zone=world.zone_a, uri="test:///default", fabric="INFINIBAND",
            block="b1", leaf=leaf,
        )
        for leaf in ("l1", "l2")
    }  # fmt: skip
    for vm, leaf in ((a, "l1"), (far, "l2"), (near, "l1")):
        Placement.objects.create(host=hosts[leaf], vm=vm, held=False)
    for vm in (far, near):
        spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    assert [vm.name for vm in spares.best_spares(cluster, a)] == ["spare-near", "spare-far"]
    assert [vm.name for vm in spares.best_spares(cluster, b)] == ["spare-far", "spare-near"]


def test_a_named_spare_still_works_and_may_be_the_pools_own(world):
    cluster = world.cluster(status=ClusterStatus.UNALLOCATED)
    a, b = world.members(cluster, 2)
    loose, pooled = world.vm("loose"), world.vm("pooled")
    spares.add_spare(cluster.pk, pooled.pk, actor=world.admin)
    operations.replace_member(cluster.pk, a.pk, loose.pk, actor=world.admin)
    operations.replace_member(cluster.pk, b.pk, pooled.pk, actor=world.admin)
    assert dict(cluster.members.values_list("name", "node_rank")) == {"loose": 0, "pooled": 1}
    assert kept(cluster) == []


def test_deleting_the_cluster_lets_its_spares_go(world):
    cluster = world.cluster()
    vm = world.vm("spare-01")
    spares.add_spare(cluster.pk, vm.pk, actor=world.admin)
    services.delete_cluster(cluster.pk, actor=world.admin)
    assert kept(cluster) == []
    vm_services.start_vm(vm.pk, actor=world.admin)
