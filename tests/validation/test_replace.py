"""교체 and node_rank: the spare takes the replaced member's rank, every step through the
single-VM services and their rules, one Operation."""

import pytest
from django.utils import translation

from clusters import operations, services
from clusters.models import ClusterStatus, Operation, OperationItem
from portal.compute.backends.simulator import SimulatorBackend
from portal.foundation import errors
from portal.models import AuditEvent
from tests.races import outcome, race
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine, VmStatus

Item = OperationItem.Status


def attached(world, cluster, names):
    vms = [world.vm(name) for name in names]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    return [VirtualMachine.objects.get(pk=vm.pk) for vm in vms]


def ranks(cluster):
    return dict(cluster.members.values_list("name", "node_rank"))


def test_attach_takes_the_lowest_free_rank_and_detach_clears_it(world):
    cluster = world.cluster()
    a, b, c = attached(world, cluster, ["a", "b", "c"])
    assert ranks(cluster) == {"a": 0, "b": 1, "c": 2}
    services.detach_vm(b.pk, actor=world.admin)
    assert VirtualMachine.objects.get(pk=b.pk).node_rank is None
    attached(world, cluster, ["d"])
    assert ranks(cluster) == {"a": 0, "d": 1, "c": 2}


def test_deleting_a_cluster_clears_its_members_ranks(world):
    cluster = world.cluster()
    attached(world, cluster, ["a", "b"])
    services.delete_cluster(cluster.pk, actor=world.admin)
    left = VirtualMachine.objects.filter(name__in="ab")
    assert set(left.values_list("node_rank", flat=True)) == {None}


def test_replacing_a_stopped_member_is_done_at_once_at_its_rank(world):
    cluster = world.cluster()
    a, b, c = attached(world, cluster, ["a", "b", "c"])
    spare = world.vm("spare", billing_type=BillingType.RESERVED)
    operation = operations.replace_member(cluster.pk, b.pk, spare.pk, actor=world.admin)
    assert operation.done and operation.last_error is None
    assert operation.kind == Operation.Kind.REPLACE
    assert list(operation.items.values_list("target_name", "status")) == [
        ("b", Item.SUCCEEDED),
        ("spare", Item.SUCCEEDED),
    ]
    assert ranks(cluster) == {"a": 0, "spare": 1, "c": 2}
    b.refresh_from_db()
    assert b.cluster_id is None and b.node_rank is None
    events = AuditEvent.objects.filter(cluster_id=cluster.pk, outcome="SUCCEEDED")
    assert {"operation.replace", "vm.attach", "vm.detach"} <= set(
        events.values_list("action", flat=True)
    )


def test_replacing_a_running_member_of_a_running_pair_stops_swaps_and_starts(
    world, django_capture_on_commit_callbacks
):
    world.capacity(10)
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    VirtualMachine.objects.filter(pk__in=[a.pk, b.pk]).update(status=VmStatus.RUNNING)
    cluster.status = ClusterStatus.RUNNING
    cluster.save()
    spare = world.vm("spare")
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done and operation.last_error is None, operation.error_code
    assert ranks(cluster) == {"spare": 0, "b": 1}
    assert VirtualMachine.objects.get(pk=a.pk).status == VmStatus.STOPPED
    assert VirtualMachine.objects.get(pk=spare.pk).status == VmStatus.RUNNING
    assert {"vm.stop", "vm.start"} <= set(AuditEvent.objects.values_list("action", flat=True))


@pytest.mark.parametrize(
    ("spare_kw", "code"),
    [
        ({"billing_type": BillingType.SPOT}, "spot_or_dr_vm"),
        ({"status": VmStatus.RUNNING}, "vm_not_eligible"),
        ({"zone": "b"}, "vm_other_zone"),
        ({"cluster": "other"}, "already_member"),
    ],
)
def test_an_ineligible_spare_is_refused_whole_and_changes_nothing(world, spare_kw, code):
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    if spare_kw.get("zone") == "b":
        spare_kw["zone"] = world.zone_b
    if spare_kw.get("cluster") == "other":
        spare_kw["cluster"] = world.cluster("other")
    spare = world.vm("spare", **spare_kw)
    with pytest.raises(errors.RuleViolation) as refused:
        operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    assert refused.value.code == code
    assert ranks(cluster) == {"a": 0, "b": 1}
    assert not Operation.objects.filter(kind=Operation.Kind.REPLACE).exists()
    assert AuditEvent.objects.filter(action="operation.replace", outcome="REFUSED").exists()


def test_replace_refuses_a_non_member_the_member_itself_and_a_viewer(world):
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    loner, spare = world.vm("loner"), world.vm("spare")
    with pytest.raises(errors.NotMember):
        operations.replace_member(cluster.pk, loner.pk, spare.pk, actor=world.admin)
    with pytest.raises(errors.AlreadyMember):
        operations.replace_member(cluster.pk, a.pk, a.pk, actor=world.admin)
    with pytest.raises(errors.PermissionRequired):
        operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.users["viewer"])
    with pytest.raises(errors.ClusterNotFound):
        operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.users["other"])
    with pytest.raises(errors.VmNotFound):
        operations.replace_member(cluster.pk, a.pk, "x", actor=world.admin)
    assert ranks(cluster) == {"a": 0, "b": 1}


@pytest.mark.django_db(transaction=True)
def test_replace_racing_an_attach_of_the_same_spare_has_one_winner(world):
    cluster, elsewhere = world.cluster("first"), world.cluster("second")
    a, b = attached(world, cluster, ["a", "b"])
    spare = world.vm("spare")

    def replace():
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
        return "won" if operation.failed == 0 else operation.error_code

    replaced, attached_elsewhere = race(
        replace, lambda: services.attach_vm(spare.pk, elsewhere.pk, actor=world.admin)
    )
    results = {
        "replace": replaced if isinstance(replaced, str) else outcome(replaced),
        "attach": outcome(attached_elsewhere),
    }
    spare.refresh_from_db()
    winners = [name for name, result in results.items() if result == "won"]
    assert len(winners) == 1, results
    assert set(results.values()) == {"won", "already_member"}, results
    if winners == ["replace"]:
        assert spare.cluster_id == cluster.pk and spare.node_rank == 0
        assert ranks(cluster) == {"spare": 0, "b": 1}
    else:
        assert spare.cluster_id == elsewhere.pk
        assert ranks(cluster) == {"a": 0, "b": 1}


def test_a_member_that_fails_to_stop_fails_the_replace_and_leaves_the_spare(
    world, django_capture_on_commit_callbacks
):
    from portal.compute.backends.simulator import SimulatorBackend

    world.capacity(10)
    cluster = world.cluster()
    a, b, c = attached(world, cluster, ["a", "b", "c"])
    VirtualMachine.objects.filter(cluster=cluster).update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    spare = world.vm("spare")
    SimulatorBackend.faults["stop_vm"] = errors.BackendError()
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done and operation.last_error is not None
    assert list(operation.items.values_list("status", flat=True)) == [Item.FAILED, Item.FAILED]
    spare.refresh_from_db()
    assert spare.cluster_id is None and spare.node_rank is None
    assert ranks(cluster) == {"a": 0, "b": 1, "c": 2}


def test_the_operations_beat_does_not_cut_a_replace_short(
    world, django_capture_on_commit_callbacks
):
    """``fanout.watch_stale`` may close the REPLACE Operation while its member stops (a kind
    it does not know); the walk goes by its items and finishes the swap anyway."""
    from clusters.operations.fanout import watch_stale

    world.capacity(10)
    cluster = world.cluster()
    a, b = attached(world, cluster, ["a", "b"])
    VirtualMachine.objects.filter(cluster=cluster).update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    spare = world.vm("spare")
    with django_capture_on_commit_callbacks() as queued:
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    watch_stale()  # the member is still 중지중
    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:
            callback()
    operation.refresh_from_db()
    assert ranks(cluster) == {"spare": 0, "b": 1}
    assert operation.done and operation.last_error is None
    assert set(operation.items.values_list("status", flat=True)) == {Item.SUCCEEDED}


def _running_trio(world):
    world.capacity(10)
    cluster = world.cluster()
    a, b, c = attached(world, cluster, ["a", "b", "c"])
    VirtualMachine.objects.filter(cluster=cluster).update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    return cluster, a


def _start(world, spare, elsewhere):
    vm_services.start_vm(spare.pk, actor=world.admin)


def _attach(world, spare, elsewhere):
    services.attach_vm(spare.pk, elsewhere.pk, actor=world.admin)


def _attach_many(world, spare, elsewhere):
    operation = operations.attach_many(elsewhere.pk, [spare.pk], actor=world.admin)
    (item,) = operation.items.all()
    if item.error_code:
        raise errors.RuleViolation.registry[item.error_code]()


def _delete(world, spare, elsewhere):
    vm_services.delete_vm(spare.pk, actor=world.admin)


def _replace_again(world, spare, elsewhere):
    b = VirtualMachine.objects.get(name="b")
    operations.replace_member(b.cluster_id, b.pk, spare.pk, actor=world.admin)


@pytest.mark.parametrize("action", [_start, _attach, _attach_many, _delete, _replace_again])
def test_the_spare_is_held_while_the_member_stops_and_the_replace_completes(
    world, django_capture_on_commit_callbacks, action
):
    """Whatever is asked of the spare while the member it replaces is stopping is refused
    with the hold's message; the replace then completes (never a member stopped and not
    replaced). The race is decided by a hook at the simulator's stop step."""
    cluster, a = _running_trio(world)
    elsewhere = world.cluster("elsewhere")
    spare = world.vm("spare")
    refusals = []

    def meanwhile():
        try:
            action(world, spare, elsewhere)
        except errors.RuleViolation as refusal:
            refusals.append(refusal)

    SimulatorBackend.hooks["stop_vm"] = meanwhile
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    assert "stop_vm" not in SimulatorBackend.hooks  # the hook ran, mid-replace
    (refusal,) = refusals
    assert refusal.code == "vm_held_for_replace"
    with translation.override("ko"):
        assert (
            str(refusal.message)
            == "진행 중인 교체의 예비 가상머신입니다. 교체가 끝난 뒤 다시 시도하세요"
        )
    operation.refresh_from_db()
    assert operation.done and operation.last_error is None, operation.error_code
    assert ranks(cluster) == {"spare": 0, "b": 1, "c": 2}
    assert VirtualMachine.objects.get(pk=spare.pk).status == VmStatus.RUNNING
    assert VirtualMachine.objects.get(pk=a.pk).status == VmStatus.STOPPED


def test_a_swap_refused_after_the_stop_puts_the_member_back(
    world, django_capture_on_commit_callbacks
):
    """Should the swap be refused all the same (here the spare's row changes under no
    service, so no hold covers it), the member this replace stopped is started again: the
    cluster ends as it was."""
    cluster, a = _running_trio(world)
    spare = world.vm("spare")

    def meanwhile():
        VirtualMachine.objects.filter(pk=spare.pk).update(status=VmStatus.RUNNING)

    SimulatorBackend.hooks["stop_vm"] = meanwhile
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done and operation.last_error is not None
    assert list(operation.items.values_list("status", flat=True)) == [Item.FAILED, Item.FAILED]
    assert ranks(cluster) == {"a": 0, "b": 1, "c": 2}
    assert VirtualMachine.objects.get(pk=a.pk).status == VmStatus.RUNNING
