"""The Operation: one action over many VMs, each item decided by the single-VM rule, one
refusal never undoing or blocking the others."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters import operations, services
from clusters.models import ClusterStatus, Operation, OperationItem, VirtualCluster
from portal.foundation import errors
from portal.models import AuditEvent
from tests.races import outcome, race
from vms.models import BillingType, VirtualMachine, VmStatus

Item = OperationItem.Status


def run(callbacks, fn, *args, **kwargs):
    """Call ``fn`` and then what it queued on commit (eager tasks), as a worker would."""
    with callbacks(execute=True):
        return fn(*args, **kwargs)


def outcomes(operation):
    return [
        (item.target_name, item.status, item.error_code)
        for item in operation.items.order_by("position")
    ]


def test_attach_many_attaches_the_eligible_and_names_each_refusal(world):
    cluster = world.cluster()
    good = [world.vm(f"node-{i}") for i in range(3)]
    spot = world.vm("spot", billing_type=BillingType.SPOT)
    running = world.vm("busy", status=VmStatus.RUNNING)
    elsewhere = world.vm("theirs", project=world.other)
    ids = [good[0].pk, spot.pk, good[1].pk, running.pk, elsewhere.pk, good[2].pk]
    operation = operations.attach_many(cluster.pk, ids, actor=world.admin)
    assert operation.done and operation.last_error is None
    assert outcomes(operation) == [
        ("node-0", Item.SUCCEEDED, ""),
        ("spot", Item.FAILED, "spot_or_dr_vm"),
        ("node-1", Item.SUCCEEDED, ""),
        ("busy", Item.FAILED, "vm_not_eligible"),
        (str(elsewhere.pk), Item.FAILED, "vm_not_found"),  # another project's: not named
        ("node-2", Item.SUCCEEDED, ""),
    ]
    assert set(cluster.members.values_list("name", flat=True)) == {"node-0", "node-1", "node-2"}
    assert (operation.total, operation.finished, operation.failed) == (6, 6, 3)
    # Audited per VM like the single attach, and once for the operation.
    per_vm = AuditEvent.objects.filter(action="vm.attach")
    assert per_vm.filter(outcome="SUCCEEDED").count() == 3
    assert per_vm.filter(outcome="REFUSED", code="spot_or_dr_vm").count() == 1
    assert AuditEvent.objects.get(action="operation.attach").cluster_id == cluster.pk
    assert not per_vm.filter(target_name="theirs").exists()


def test_attach_many_without_vm_update_is_refused_whole_up_front(world):
    """The console and the API give one answer: the permission error, no Operation, no
    item, the refusal audited as the operation."""
    cluster = world.cluster()
    vms = [world.vm(f"node-{i}") for i in range(2)]
    with pytest.raises(errors.PermissionRequired):
        operations.attach_many(cluster.pk, [vm.pk for vm in vms], actor=world.users["viewer"])
    assert not Operation.objects.exists() and not cluster.members.exists()
    refused = AuditEvent.objects.get(action="operation.attach")
    assert (refused.outcome, refused.target_id) == ("REFUSED", cluster.pk)


@pytest.mark.parametrize("bad", [[], None, "1,2", [1, "x"], [True], [2**70]])
def test_attach_many_refuses_a_bad_list_whole(world, bad):
    cluster = world.cluster()
    with pytest.raises(errors.TargetsRequired):
        operations.attach_many(cluster.pk, bad, actor=world.admin)
    assert not Operation.objects.exists()


def test_attach_many_to_an_invisible_cluster_is_not_found(world):
    cluster = world.cluster(project=world.other)
    vm = world.vm()
    with pytest.raises(errors.ClusterNotFound):
        operations.attach_many(cluster.pk, [vm.pk], actor=world.admin)
    assert not Operation.objects.exists() and vm.cluster_id is None


def test_attach_many_has_a_query_budget_per_vm(world):
    cluster = world.cluster()
    few = [world.vm(f"a-{i}") for i in range(2)]
    many = [world.vm(f"b-{i}") for i in range(20)]
    other = world.cluster("other")
    with CaptureQueriesContext(connection) as two:
        operations.attach_many(cluster.pk, [vm.pk for vm in few], actor=world.admin)
    with CaptureQueriesContext(connection) as twenty:
        operations.attach_many(other.pk, [vm.pk for vm in many], actor=world.admin)
    per_vm = (len(twenty) - len(two)) / 18
    assert per_vm <= 4, per_vm


def test_detach_many_keeps_a_running_cluster_at_two(world):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3)
    operation = operations.detach_many(cluster.pk, [vm.pk for vm in members], actor=world.admin)
    assert [status for _n, status, _c in outcomes(operation)] == [
        Item.SUCCEEDED,
        Item.FAILED,
        Item.FAILED,
    ]
    assert {code for _n, _s, code in outcomes(operation)} == {"", "not_enough_members"}
    assert cluster.members.count() == 2


def test_start_members_starts_each_stopped_member(world, django_capture_on_commit_callbacks):
    world.capacity(10)
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 3)
    world.vm("already", cluster=cluster, status=VmStatus.RUNNING)
    operation = run(
        django_capture_on_commit_callbacks, operations.start_members, cluster.pk, actor=world.admin
    )
    operation.refresh_from_db()
    assert operation.done and operation.total == 3 and operation.failed == 0
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.RUNNING}
    assert AuditEvent.objects.filter(action="vm.start", outcome="SUCCEEDED").count() == 3


def test_start_members_of_a_cluster_not_running_is_refused_whole(world):
    cluster = world.cluster(status=ClusterStatus.TERMINATED)
    world.members(cluster, 2)
    with pytest.raises(errors.ClusterNotRunning):
        operations.start_members(cluster.pk, actor=world.admin)
    assert AuditEvent.objects.filter(action="operation.start_members", outcome="REFUSED").exists()


def test_one_refused_start_does_not_block_the_others(world, django_capture_on_commit_callbacks):
    world.capacity(10)
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3)
    operation = run(
        django_capture_on_commit_callbacks,
        operations.start_members,
        cluster.pk,
        actor=world.admin,
        vm_ids=[members[0].pk, world.vm("loner").pk, members[2].pk],
    )
    operation.refresh_from_db()
    assert [status for _n, status, _c in outcomes(operation)] == [
        Item.SUCCEEDED,
        Item.FAILED,
        Item.SUCCEEDED,
    ]
    assert outcomes(operation)[1][2] == "not_member"
    assert VirtualMachine.objects.get(pk=members[1].pk).status == VmStatus.STOPPED


def test_stop_cluster_with_members_stops_them_then_the_cluster(
    world, django_capture_on_commit_callbacks
):
    world.capacity(10)
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    world.vm("idle", cluster=cluster)
    operation = run(
        django_capture_on_commit_callbacks,
        operations.stop_cluster_with_members,
        cluster.pk,
        actor=world.admin,
    )
    operation.refresh_from_db()
    cluster.refresh_from_db()
    assert operation.done and operation.last_error is None and operation.total == 2
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.STOPPED}
    assert cluster.status == ClusterStatus.TERMINATED
    # The plain stop still refuses while members run.
    other = world.cluster("plain", status=ClusterStatus.RUNNING)
    world.members(other, 2, status=VmStatus.RUNNING)
    with pytest.raises(errors.MembersStillRunning):
        services.stop_cluster(other.pk, actor=world.admin)


def test_stop_cluster_with_members_needs_cluster_update(world):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    with pytest.raises(errors.PermissionRequired):
        operations.stop_cluster_with_members(cluster.pk, actor=world.users["viewer"])
    assert not Operation.objects.exists()


def create_three_nodes(world, **more):
    """gpu-node-01..03 in one 가상머신 생성 (``more``: the cluster to attach them to)."""
    return operations.create_vms(**world.new_vms("gpu-node", 3, **more))


def test_create_vms_names_them_and_attaches_as_one_operation(world):
    cluster = world.cluster()
    operation = create_three_nodes(world, cluster_id=cluster.pk)
    assert operation.done and operation.failed == 0
    assert sorted(cluster.members.values_list("name", flat=True)) == [
        "gpu-node-01",
        "gpu-node-02",
        "gpu-node-03",
    ]
    assert set(cluster.members.values_list("status", flat=True)) == {VmStatus.STOPPED}


@pytest.mark.parametrize("count", [0, 65, "x", -1])
def test_create_vms_refuses_a_bad_count(world, count):
    with pytest.raises(errors.CountInvalid):
        operations.create_vms(**world.new_vms("n", count))
    assert not VirtualMachine.objects.exists()


def test_create_vms_is_all_or_nothing_when_a_name_is_taken(world):
    world.vm("gpu-node-02")
    with pytest.raises(errors.VmNameTaken):
        create_three_nodes(world)
    assert list(VirtualMachine.objects.values_list("name", flat=True)) == ["gpu-node-02"]
    assert not Operation.objects.exists()


def test_single_start_is_an_operation_done_when_running(world, django_capture_on_commit_callbacks):
    world.capacity(10)
    cluster = world.cluster()
    world.members(cluster, 2)
    operation, _cluster = run(
        django_capture_on_commit_callbacks,
        operations.start_cluster_op,
        cluster.pk,
        actor=world.admin,
    )
    operation.refresh_from_db()
    assert operation.done and operation.kind == Operation.Kind.START_CLUSTER
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.RUNNING


def test_a_refused_single_action_leaves_no_operation(world):
    cluster = world.cluster()
    with pytest.raises(errors.NotEnoughMembers):
        operations.start_cluster_op(cluster.pk, actor=world.admin, idempotency=("k1", "h"))
    assert not Operation.objects.exists()
    # The key is free again for a retry.
    world.members(cluster, 2)
    operation, _ = operations.start_cluster_op(
        cluster.pk, actor=world.admin, idempotency=("k1", "h")
    )
    assert operation.idempotency_key == "k1"


def test_one_idempotency_key_claims_one_operation(world):
    cluster = world.cluster()
    vm = world.vm()
    operations.attach_many(cluster.pk, [vm.pk], actor=world.admin, idempotency=("key", "a"))
    with pytest.raises(errors.IdempotencyConflict):
        operations.attach_many(cluster.pk, [vm.pk], actor=world.admin, idempotency=("key", "a"))
    assert Operation.objects.count() == 1


def test_attach_candidates_say_why_each_is_refused(world):
    cluster = world.cluster()
    world.vm("b-ok")
    world.vm("a-spot", billing_type=BillingType.SPOT)
    world.vm("c-member", cluster=world.cluster("elsewhere"))
    world.vm("d-l40s", instance_type=world.l40s)
    world.vm("theirs", project=world.other)
    pairs = operations.attach_candidates(world.admin, cluster)
    assert [(vm.name, refusal and refusal.code) for vm, refusal in pairs] == [
        ("b-ok", None),
        ("a-spot", "spot_or_dr_vm"),
        ("c-member", "already_member"),
        ("d-l40s", "vm_other_instance_type"),
    ]


@pytest.mark.django_db(transaction=True)
def test_bulk_attach_racing_a_single_attach_of_the_same_vm_has_one_winner(world):
    from tests.conftest import builtin_role  # noqa: F401 - roles survive the flush

    first, second = world.cluster("first"), world.cluster("second")
    contested = world.vm("contested")
    others = [world.vm(f"x-{i}") for i in range(5)]

    def bulk():
        op = operations.attach_many(
            first.pk, [vm.pk for vm in others] + [contested.pk], actor=world.admin
        )
        return op.items.get(vm=contested).status

    bulk_result, single_result = race(
        bulk, lambda: services.attach_vm(contested.pk, second.pk, actor=world.admin)
    )
    results = {"bulk": bulk_result, "single": outcome(single_result)}
    contested.refresh_from_db()
    winners = [name for name, result in results.items() if result in (Item.SUCCEEDED, "won")]
    assert len(winners) == 1, results
    assert contested.cluster_id == (first.pk if winners == ["bulk"] else second.pk)
    assert first.members.count() == 5 + (winners == ["bulk"])
