"""What the 연결된 가상머신 tab offers each member: asked once per status, it must be what
asking every member would give; and it may only be asked once per status while the rules
read nothing of a member but its status."""

import pytest

from clusters import services
from clusters.models import ClusterStatus, MemberStates
from clusters.views.members import member_controls, shown_reason
from portal.foundation.errors import InvalidTransition, VmNotStopped
from vms import services as vm_services
from vms.models import VmStatus

MEMBER_RULES = (vm_services.start_refusal, vm_services.stop_refusal, services.detach_refusal)


def asked_of_each(cluster, members) -> dict:
    """The controls as the rules give them member by member (the reference)."""
    states = MemberStates.of(vm.status for vm in members)
    startable, stoppable, detach, start_reason = set(), set(), {}, ""
    for vm in members:
        refusal = vm_services.start_refusal(vm, cluster)
        if refusal is None:
            startable.add(vm.pk)
        elif not start_reason:
            start_reason = shown_reason(refusal)
        if vm_services.stop_refusal(vm) is None:
            stoppable.add(vm.pk)
        refusal = services.detach_refusal(vm, cluster, states)
        if refusal is None:
            detach[vm.pk] = ""
        elif not isinstance(refusal, VmNotStopped | InvalidTransition):
            detach[vm.pk] = refusal.message
    return {
        "startable": startable,
        "stoppable": stoppable,
        "detach": detach,
        "start_reason": "" if startable else start_reason,
        "detach_reasons": sorted({reason for reason in detach.values() if reason}),
    }


@pytest.mark.parametrize(
    ("cluster_status", "statuses"),
    [
        (
            ClusterStatus.RUNNING,
            [
                VmStatus.RUNNING,
                VmStatus.STOPPED,
                VmStatus.ERROR,
                VmStatus.STARTING,
                VmStatus.STOPPING,
                VmStatus.RUNNING,
            ],
        ),
        (
            ClusterStatus.RUNNING,
            [VmStatus.STOPPED, VmStatus.RUNNING],
        ),  # a detach would leave fewer than 2
        (ClusterStatus.UNALLOCATED, [VmStatus.STOPPED, VmStatus.STOPPED, VmStatus.STOPPED]),
        (
            ClusterStatus.WAITING,
            [VmStatus.STOPPED, VmStatus.STARTING],
        ),  # membership closed while it changes
        (ClusterStatus.TERMINATED, [VmStatus.STOPPED, VmStatus.ERROR]),
    ],
)
def test_each_member_is_offered_what_its_own_rules_say(world, cluster_status, statuses):
    cluster = world.cluster(status=cluster_status)
    members = [
        world.vm(f"n{i}", cluster=cluster, status=status) for i, status in enumerate(statuses)
    ]
    controls = member_controls(world.users["operator"], cluster, members)
    shown = {key: controls[key] for key in ("startable", "stoppable", "detach", "start_reason")}
    shown["detach_reasons"] = sorted(controls["detach_reasons"])
    assert shown == asked_of_each(cluster, members)


def test_a_user_who_may_not_update_vms_is_offered_nothing(world):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    members = world.members(cluster, 3)
    controls = member_controls(world.users["viewer"], cluster, members)
    assert (controls["startable"], controls["stoppable"], controls["detach"]) == (set(), set(), {})


class OnlyStatus:
    """A member that has its status and nothing else: a rule that reads any other field of it
    (its billing type, its name, its pk) fails with AttributeError."""

    __slots__ = ("status",)

    def __init__(self, status):
        self.status = status


def ask(rule, member, cluster, states):
    """What ``rule`` answers for ``member``: the refusal's class, or None."""
    if rule is vm_services.stop_refusal:
        answer = rule(member)
    elif rule is services.detach_refusal:
        answer = rule(member, cluster, states)
    else:
        answer = rule(member, cluster)
    return None if answer is None else type(answer)


@pytest.mark.parametrize("rule", MEMBER_RULES, ids=lambda rule: rule.__name__)
def test_the_member_rules_read_only_the_members_status(world, rule):
    """``member_controls`` asks each status once: a rule that read anything else of a member
    (its billing type, its name) would be answered for one member and shown on all of them.
    Such a rule must change ``member_controls`` first. Asked of a member that is only a
    status, every rule answers, and as it answers for a real member of that status."""
    for cluster_status in (
        ClusterStatus.RUNNING,
        ClusterStatus.UNALLOCATED,
        ClusterStatus.WAITING,
        ClusterStatus.TERMINATED,
    ):
        cluster = world.cluster(f"c-{cluster_status}", status=cluster_status)
        vm = world.vm(f"m-{cluster_status}", cluster=cluster)
        for statuses in (
            [VmStatus.STOPPED, VmStatus.RUNNING],
            [VmStatus.STOPPED, VmStatus.STOPPED, VmStatus.RUNNING],
        ):
            states = MemberStates.of(statuses)
            for status in VmStatus.values:
                vm.status = status
                asked = ask(rule, OnlyStatus(status), cluster, states)
                assert asked == ask(rule, vm, cluster, states), (cluster_status, status)


def test_a_rule_reading_more_than_the_status_is_caught():
    def rule(vm, cluster):
        return vm.status if vm.billing_type else None

    with pytest.raises(AttributeError, match="billing_type"):
        rule(OnlyStatus(VmStatus.STOPPED), None)
