"""교체 raced as an attacker would, on PostgreSQL with a real Celery worker (``redis_worker``):
two replaces of one member at once, a replace against a detach and against a stop, each
sent together (``tests.races``) and again in the one window a replace leaves open between
its steps. Whatever wins, once all has settled ``replace_problems`` must find nothing: the
ranks held once each, the spare fully in or fully out, no hold left, every Operation and item
terminal with a reason, and the audit trail to match.

The window between steps is made by state: the worker's simulator step (a hook) takes the
replace's Operation row, so its next look waits there; the attack runs; the row is let go.
"""

from collections import Counter

import pytest

from clusters import operations
from clusters.models import Operation, OperationItem
from portal.compute.backends.simulator import SimulatorBackend
from portal.models import RoleBinding
from tests.concurrency.replace_checks import (
    RowLock,
    ranks_of,
    replace_problems,
    running_cluster,
    wait_settled,
)
from tests.races import outcome, race
from tests.waiting import wait_until
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROUNDS = 3  # each race again on a cluster of its own: the interleavings differ run to run
Item = OperationItem.Status
TALLY: Counter = Counter()  # (race, outcomes): how each round ended, for the run's report


def replace(world, cluster, member, spare):
    return lambda: operations.replace_member(cluster.pk, member.pk, spare.pk, actor=world.admin)


def detach(world, cluster, vm):
    return lambda: operations.detach_vm_op(vm.pk, actor=world.admin)


def stop_member(world, cluster, vm):
    return lambda: operations.stop_vm_op(vm.pk, actor=world.admin)


def start_member(world, cluster, vm):
    return lambda: operations.start_vm_op(vm.pk, actor=world.admin)


def stop_with_members(world, cluster, _vm=None):
    return lambda: operations.stop_cluster_op(cluster.pk, actor=world.admin, stop_members=True)


def stop_cluster(world, cluster, _vm=None):
    return lambda: operations.stop_cluster_op(cluster.pk, actor=world.admin)


def stop_and_wait(world, vms):
    for vm in vms:
        operations.stop_vm_op(vm.pk, actor=world.admin)
    ids = [vm.pk for vm in vms]
    stopped = VirtualMachine.objects.filter(pk__in=ids, status=VmStatus.STOPPED)
    wait_until(lambda: stopped.count() == len(ids), 60, what="the members to stop")


def ended(result):
    """How a call ended: its refusal's code, or its Operation's kind and end once settled."""
    operation = result[0] if isinstance(result, tuple) else result  # the ops' (op, target)
    if isinstance(operation, Operation):
        operation.refresh_from_db()
        return f"{operation.kind}: {operation.error_code or 'ok'}"
    return outcome(result)


# (race, members stopped first, the calls sent together: each builds its call from the world,
# the cluster, its members and two spares)
RACES = {
    "two replaces of one running member": (
        0,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), replace(w, c, m[0], s[1])],
    ),
    "two replaces of one stopped member": (
        1,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), replace(w, c, m[0], s[1])],
    ),
    "two members replaced by one spare": (
        0,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), replace(w, c, m[1], s[0])],
    ),
    "replace against a detach of the running member": (
        0,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), detach(w, c, m[0])],
    ),
    "replace against a detach of the stopped member": (
        1,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), detach(w, c, m[0])],
    ),
    "replace against a stop of the member": (
        0,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), stop_member(w, c, m[0])],
    ),
    "replace against a stop of the cluster with its members": (
        0,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), stop_with_members(w, c)],
    ),
    "replace against a stop of the cluster, members stopped": (
        3,
        lambda w, c, m, s: [replace(w, c, m[0], s[0]), stop_cluster(w, c)],
    ),
}


@pytest.mark.parametrize("name", list(RACES))
def test_sent_together(world, redis_worker, name):
    stopped_first, calls = RACES[name]
    for round_ in range(ROUNDS):
        cluster, members = running_cluster(world, f"r{round_}")
        stop_and_wait(world, members[:stopped_first])
        spares = [world.vm(f"r{round_}-spare-{i}") for i in range(2)]
        before = ranks_of(cluster)
        results = race(*calls(world, cluster, members, spares))
        wait_settled()
        TALLY[(name, tuple(ended(result) for result in results))] += 1
        assert replace_problems(cluster, before) == [], (name, round_)
    print_tally(name)


def print_tally(name):
    for (race_name, outcomes), count in sorted(TALLY.items()):
        if race_name == name:
            print(f"\n{race_name}: {count} × {outcomes}")


def hold_next_look(step):
    """From the worker's simulator ``step`` on, the open replace's next look waits at its
    Operation row: returns a box that holds the RowLock once taken."""
    box = {}

    def take():
        operation = Operation.objects.open().get(kind=Operation.Kind.REPLACE)
        box["lock"] = RowLock(Operation, operation.pk).take()

    SimulatorBackend.hooks[step] = take
    return box


def between_steps(world, step, attack):
    """A replace of a running member, ``attack`` run while the replace waits after the
    worker's ``step`` (its member stopped, or its spare started); everything then settles."""
    cluster, members = running_cluster(world)
    spares = [world.vm("spare"), world.vm("spare-2")]
    before = ranks_of(cluster)
    box = hold_next_look(step)
    operation = replace(world, cluster, members[0], spares[0])()
    wait_until(lambda: "lock" in box, 60, what=f"the worker at {step}")
    box["lock"].wait_for_waiter("the replace's next look")
    try:
        result = attack(world, cluster, members, spares)
    finally:
        box["lock"].release()
    wait_settled()
    operation.refresh_from_db()
    assert replace_problems(cluster, before) == []
    return cluster, members, spares, operation, result


def test_a_second_replace_of_the_member_stopped_by_the_first(world, redis_worker):
    cluster, (a, *_), (s1, s2), first, second = between_steps(
        world, "stop_vm", lambda w, c, m, s: replace(w, c, m[0], s[1])()
    )
    # The member was the cluster's to replace again: the second swap wins, the first finds
    # its member gone and changes nothing.
    assert (ended(first), ended(second)) == ("replace: not_member", "replace: ok")
    assert ranks_of(cluster)[s2.pk] == 0 and s1.pk not in ranks_of(cluster)


@pytest.mark.parametrize(
    ("attack", "expected"),
    [
        (lambda w, c, m, s: detach(w, c, m[0])(), ("replace: not_member", "detach: ok")),
        (
            lambda w, c, m, s: start_member(w, c, m[0])(),
            ("replace: invalid_transition", "start_vm: ok"),
        ),
        # The replace accepted first starts its spare: the stop then finds a member running.
        (
            lambda w, c, m, s: stop_with_members(w, c)(),
            ("replace: ok", "stop_cluster: members_still_running"),
        ),
    ],
    ids=["detach", "start the member again", "stop the cluster with its members"],
)
def test_an_attack_after_the_member_stopped(world, redis_worker, attack, expected):
    *_, operation, result = between_steps(world, "stop_vm", attack)
    assert (ended(operation), ended(result)) == expected


def test_a_stop_of_the_spare_after_it_started(world, redis_worker):
    """The spare joined and started; stopped before the replace looked again, the replace
    fails, saying why (not that the spare is no member: it is one)."""
    cluster, _m, (spare, _s2), operation, _r = between_steps(
        world, "start_vm", lambda w, c, m, s: stop_member(w, c, s[0])()
    )
    assert items_of(operation) == [Item.SUCCEEDED, Item.FAILED]
    assert VirtualMachine.objects.get(pk=spare.pk).cluster_id == cluster.pk
    assert operation.error_code not in ("", "not_member"), operation.error_code


def test_the_actor_losing_the_cluster_before_the_swap(world, redis_worker):
    """The replace's actor may no longer read the cluster when the swap comes: refused as the
    attach would be, the replace ends; never left open."""
    *_, operation, _r = between_steps(
        world, "stop_vm", lambda w, c, m, s: RoleBinding.objects.filter(user=w.admin).delete()
    )
    assert operation.done and operation.error_code == "cluster_not_found"


def items_of(operation):
    return list(operation.items.order_by("position").values_list("status", flat=True))
