"""Create and rename have their rules as ``*_refusal`` functions and ``preflight_*`` twins,
like start, stop and delete: a preflight answers exactly what the action raises and changes
nothing; 교체's rule is free of the permission, which its preflight adds."""

import pytest

from clusters import operations, services
from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType
from tests.clusters.test_preflight import outcome
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine, VmStatus


def code(refusal):
    return refusal.code if refusal is not None else None


# (the app, its create's kind argument, the name, in zone a?, the instance type, the kind)
CREATES = [
    (app, field, name, zone, itype, kind)
    for app, field, good, bad in [
        ("cluster", "fabric_type", FabricType.INFINIBAND, "TOKEN_RING"),
        ("vm", "billing_type", BillingType.ON_DEMAND, "FREE"),
    ]
    for name, zone, itype, kind in [
        ("fresh", True, "h100", good),
        ("taken", True, "h100", good),
        ("fresh", False, "h100", good),
        ("fresh", True, None, good),
        ("fresh", True, "h100", bad),
        ("fresh", True, "l40s", good),  # a cluster's fabric not offered for the type there
    ]
]


@pytest.mark.parametrize("actor_name", ["admin", "viewer"])
@pytest.mark.parametrize(("app", "field", "name", "zone", "itype", "kind"), CREATES)
def test_preflight_create_answers_what_the_create_raises(
    world, actor_name, app, field, name, zone, itype, kind
):
    world.cluster("taken")
    world.vm("taken")
    model, module = {"cluster": (VirtualCluster, services), "vm": (VirtualMachine, vm_services)}[
        app
    ]
    create = services.create_cluster if app == "cluster" else vm_services.create_vm
    actor = world.users[actor_name]
    zone = world.zone_a if zone else None
    itype = getattr(world, itype) if itype else None
    count = model.objects.count()
    asked = module.preflight_create(actor, world.demo, name, zone, itype, kind)
    assert model.objects.count() == count, "a preflight changed something"
    ids = {"zone_id": zone.pk if zone else None, "instance_type_id": itype.pk if itype else None}
    raised = outcome(create, actor=actor, project=world.demo, name=name, **ids, **{field: kind})
    assert code(asked) == raised


@pytest.mark.parametrize("actor_name", ["admin", "viewer"])
@pytest.mark.parametrize(
    ("status", "name"),
    [
        (ClusterStatus.UNALLOCATED, "new"),
        (ClusterStatus.UNALLOCATED, "taken"),
        (ClusterStatus.UNALLOCATED, "mine"),  # its own name: no query asks, the answer is the same
        (ClusterStatus.DELETED, "new"),
        (ClusterStatus.RUNNING, "new"),
    ],
)
def test_preflight_rename_answers_what_rename_cluster_raises(world, actor_name, status, name):
    world.cluster("taken")
    cluster = world.cluster("mine", status=status)
    actor = world.users[actor_name]
    asked = services.preflight_rename(actor, cluster, name)
    assert code(asked) == outcome(services.rename_cluster, cluster.pk, actor=actor, name=name)


@pytest.mark.parametrize("actor_name", ["admin", "viewer"])
@pytest.mark.parametrize("name", ["new", "taken", "mine"])
def test_vm_preflight_rename_answers_what_rename_vm_raises(world, actor_name, name):
    world.vm("taken")
    vm = world.vm("mine")
    actor = world.users[actor_name]
    asked = vm_services.preflight_rename(actor, vm, name)
    assert code(asked) == outcome(vm_services.rename_vm, vm.pk, actor=actor, name=name)


def test_replace_refusal_is_the_rule_alone_and_its_preflight_adds_the_permission(world):
    cluster = world.cluster()
    member, _other = world.members(cluster, 2)
    spare = world.vm("spare")
    viewer = world.users["viewer"]
    assert operations.replace_refusal(cluster, member, spare) is None
    assert code(operations.preflight_replace(viewer, cluster, member, spare)) == (
        "permission_required"
    )
    assert operations.preflight_replace(world.admin, cluster, member, spare) is None
    spare.status = VmStatus.RUNNING
    assert code(operations.replace_refusal(cluster, member, spare)) == "vm_not_eligible"


def test_the_running_cluster_allocation_step_is_one_function(world):
    """``reserve_node`` is the step both the single attach and the bulk one take: nothing to
    reserve unless the cluster runs; past the capacity, the capacity error."""
    world.capacity(2)
    cluster = world.cluster(status=ClusterStatus.UNALLOCATED)
    assert services.reserve_node(cluster, 5) is None
    running = world.cluster("running", status=ClusterStatus.RUNNING)
    assert services.reserve_node(running, 1) is None
    assert code(services.reserve_node(running, 2)) == "capacity_unavailable"
    assert not VirtualMachine.objects.exists()


def test_a_rename_to_its_own_name_asks_no_query(world, django_assert_num_queries):
    """The 정보 tab asks whether 이름 변경 would be taken for the name shown: no other live
    cluster (or VM) can hold it, so the rule answers without reading."""
    cluster, vm = world.cluster("mine"), world.vm("mine-vm")
    with django_assert_num_queries(0):
        assert services.rename_refusal(cluster, "mine") is None
        assert vm_services.rename_refusal(vm, "mine-vm") is None
    with django_assert_num_queries(1):
        assert services.rename_refusal(cluster, "other") is None
