"""Concurrent requests never break the rules; exactly one wins (docs/rules.md#concurrency).

Real threads, each with its own PostgreSQL connection and transaction.
"""

import pytest

from clusters import services
from clusters.models import ClusterStatus, VirtualCluster
from portal.foundation import errors
from tests.races import race
from vms.models import VirtualMachine

pytestmark = pytest.mark.django_db(transaction=True)


def test_twenty_attaches_of_one_vm_make_one_membership(world):
    clusters = [world.cluster(f"c{i}") for i in range(20)]
    vm = world.vm("contested")
    results = race(
        *[lambda c=c: services.attach_vm(vm.pk, c.pk, actor=world.admin) for c in clusters]
    )
    winners = [r for r in results if isinstance(r, VirtualMachine)]
    assert len(winners) == 1
    assert all(isinstance(r, errors.AlreadyMember) for r in results if r not in winners)
    assert VirtualMachine.objects.filter(pk=vm.pk, cluster__isnull=False).count() == 1


@pytest.mark.parametrize("round_", range(5))
def test_start_racing_a_detach_never_runs_with_one_member(world, round_):
    cluster = world.cluster()
    a, _b = world.members(cluster, 2)
    start, detach = race(
        lambda: services.start_cluster(cluster.pk, actor=world.admin),
        lambda: services.detach_vm(a.pk, actor=world.admin),
    )
    cluster.refresh_from_db()
    members = cluster.members.count()
    if isinstance(start, errors.RuleViolation):
        assert isinstance(start, errors.NotEnoughMembers) and members == 1
        assert cluster.status == ClusterStatus.UNALLOCATED
    else:
        # The detach came while the start was under way (ClusterChanging) or after it had
        # reached 실행중 with two members (NotEnoughMembers): either way it was refused.
        assert isinstance(detach, errors.ClusterChanging | errors.NotEnoughMembers)
        assert members == 2 and cluster.status == ClusterStatus.RUNNING


def test_double_clicked_start_starts_once(world):
    cluster = world.cluster()
    world.members(cluster, 2)
    results = race(*[lambda: services.start_cluster(cluster.pk, actor=world.admin)] * 8)
    assert sum(isinstance(r, VirtualCluster) for r in results) == 1
    assert sum(isinstance(r, errors.InvalidTransition) for r in results) == 7
    cluster.refresh_from_db()
    assert cluster.generation == 1 and cluster.status == ClusterStatus.RUNNING
