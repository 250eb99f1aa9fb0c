"""A 교체 takes its VMs' locks in id order, as every other action does: a multi-VM attach
that names the member and the spare (refused for the member, AlreadyMember) then waits or
wins, and never deadlocks with the replace's request or with the swap on the worker.

Each interleaving is made by state: a third transaction holds the first VM both want, the
attach queues behind it, the replace reaches its own wait, then the held row is let go.
"""

import threading

import pytest
from django.db import connection

from clusters import operations
from clusters.models import Operation
from portal.compute.backends.simulator import SimulatorBackend
from portal.foundation.errors import RuleViolation
from tests.concurrency.replace_checks import (
    RowLock,
    lock_waiters,
    ranks_of,
    replace_problems,
    running_cluster,
    wait_settled,
)
from tests.waiting import wait_until
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class Racer(threading.Thread):
    """A request on a thread (and connection) of its own: its result, its typed refusal, or
    the unexpected exception that would have been a 500."""

    def __init__(self, call):
        super().__init__(daemon=True)
        self.call, self.result, self.crash = call, None, None

    def run(self):
        try:
            self.result = self.call()
        except RuleViolation as refusal:
            self.result = refusal
        except Exception as exc:  # a deadlock is what this looks for
            self.crash = exc
        finally:
            connection.close()

    def finish(self):
        self.join(60)
        assert not self.is_alive(), "a request never ended"
        assert self.crash is None, f"{type(self.crash).__name__}: {self.crash}"
        return self.result


def attach_many_of(world, cluster, *vms):
    return lambda: operations.attach_many(cluster.pk, [vm.pk for vm in vms], actor=world.admin)


def item_codes(operation):
    return dict(operation.items.values_list("target_name", "error_code"))


def test_an_attach_naming_member_and_spare_waits_for_the_replace_request(world, redis_worker):
    """Member before spare by id. The attach holds the member and wants the spare; the
    replace's request holds the spare and wants the member (to stop it) — before the fix."""
    cluster, (a, _b, _c) = running_cluster(world)
    spare, elsewhere = world.vm("spare"), world.cluster("elsewhere")
    before = ranks_of(cluster)
    held = RowLock(VirtualMachine, a.pk).take()
    attach = Racer(attach_many_of(world, elsewhere, a, spare))
    attach.start()
    held.wait_for_waiter("the attach to queue for the member")
    replace = Racer(
        lambda: operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    )
    replace.start()
    wait_until(lambda: lock_waiters() >= 2, 30, what="the replace to wait too")
    held.release()
    attached, replaced = attach.finish(), replace.finish()
    # The attach came first: the spare went elsewhere, so the replace is refused whole.
    assert item_codes(attached) == {"swap-0": "already_member", "spare": ""}
    assert isinstance(replaced, RuleViolation) and replaced.code == "already_member"
    wait_settled()
    assert ranks_of(cluster) == before
    assert replace_problems(cluster, before) == []


def test_an_attach_naming_spare_and_member_waits_for_the_swap_on_the_worker(world, redis_worker):
    """Spare before member by id. The swap (a task) holds the members and wants the spare;
    the attach holds the spare and wants the member — before the fix. Made at the worker's
    stop step: the spare is held there, the attach queues for it, the swap follows."""
    spare = world.vm("spare")  # the lower id
    cluster, (a, _b, _c) = running_cluster(world)
    elsewhere = world.cluster("elsewhere")
    before = ranks_of(cluster)
    held = RowLock(VirtualMachine, spare.pk)
    attach = Racer(attach_many_of(world, elsewhere, spare, a))

    def meanwhile():  # in the worker, as it stops the member
        held.take()
        attach.start()
        held.wait_for_waiter("the attach to queue for the spare")

    SimulatorBackend.hooks["stop_vm"] = meanwhile
    operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    wait_until(lambda: lock_waiters() >= 2, 30, what="the swap to wait for the spare")
    held.release()
    attached = attach.finish()
    # The spare is the replace's (its hold), the member the cluster's: both refused.
    assert item_codes(attached) == {"spare": "vm_held_for_replace", "swap-0": "already_member"}
    wait_settled()
    operation.refresh_from_db()
    assert operation.error_code == "", operation.error_code
    assert VirtualMachine.objects.get(pk=spare.pk).status == VmStatus.RUNNING
    assert replace_problems(cluster, before) == []
    assert Operation.objects.get(pk=attached.pk).done
