"""Issue 9 item 1: no single SIGKILL wedges the portal, on either broker.

A supervised worker (prefork, two children) and beat run as real processes, as ``rundemo``
runs them, with a short transition timeout and reconcile period (``tests.faults.stack``).
One process of the stack is SIGKILLed while a two-member cluster starts: the web process
right after it committed (before it could queue the task), the worker's main process, both
of its pool children, or beat. Then no cluster or VM may stay transitional longer than
TRANSITION_TIMEOUT_SECONDS + 2 × RECONCILE_EVERY_SECONDS, the killed process comes back, and
the worker consumes again.
"""

import os
import signal
import time

import pytest

from clusters import services as cluster_services
from clusters.models import ClusterStatus, VirtualCluster
from tests.faults.harness import wait_until
from tests.faults.stack import (
    BOUND,
    HEARTBEAT_MAX_AGE,
    running_stack,
    start_a_vm_through_the_worker,
    start_in_a_web_process_that_dies_after_commit,
    transitional_seconds,
)
from vms.models import VirtualMachine

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

VICTIMS = ["web", "worker-main", "worker-children", "beat"]


@pytest.fixture(params=["filesystem", "redis"])
def stack(request, world, tmp_path):
    world.capacity(64)
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        url = server.url
    else:
        url = "filesystem://"
    with running_stack(url, tmp_path) as running:
        yield world, running


def states(cluster):
    return [
        *VirtualCluster.objects.filter(pk=cluster.pk).values_list("status", flat=True),
        *VirtualMachine.objects.values_list("status", flat=True),
    ]


@pytest.mark.parametrize("victim", VICTIMS)
def test_no_single_sigkill_leaves_a_cluster_transitional(stack, victim):
    world, stack = stack
    cluster = world.cluster("fault")
    world.members(cluster, 2)
    before = {name: stack.pid(name) for name in ("worker", "beat")}

    if victim == "web":
        start_in_a_web_process_that_dies_after_commit(stack, cluster, world.admin)
    else:
        pool = stack.pool()
        cluster_services.start_cluster(cluster.pk, actor=world.admin)
        time.sleep(0.2)  # within 0.5 s: the first step is queued or running
        pids = {
            "worker-main": [before["worker"]],
            "worker-children": pool,
            "beat": [before["beat"]],
        }[victim]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

    took = transitional_seconds(lambda: states(cluster), timeout=BOUND + 20)
    assert took <= BOUND, f"transitional for {took:.1f}s, bound {BOUND}s"
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.RUNNING

    # What was killed is back, and the worker consumes again: new work flows end to end.
    if victim in ("worker-main", "beat"):
        name = victim.split("-")[0]
        wait_until(lambda: stack.pid(name) != before[name], 5, what=f"{name} restarted")
    wait_until(stack.consuming, 20, interval=0.1, what="the worker to consume again")
    start_a_vm_through_the_worker(world)


def test_a_long_repair_does_not_starve_the_worker_heartbeat(world, tmp_path):
    """Beat repairs in a thread: while a slow backend takes longer than the heartbeat's max
    age to finish a stuck start, beat keeps asking for heartbeats, so the idle worker is
    not taken for a wedged one (and SIGKILLed by the supervisor)."""
    world.capacity(64)
    slow_step = 2 * HEARTBEAT_MAX_AGE / 3  # three steps: twice the max age
    with running_stack("filesystem://", tmp_path, SIMULATOR_STEP_SECONDS=slow_step) as stack:
        cluster = world.cluster("slow")
        world.members(cluster, 2)
        start_in_a_web_process_that_dies_after_commit(stack, cluster, world.admin)
        fresh = []
        while VirtualCluster.objects.get(pk=cluster.pk).status != ClusterStatus.RUNNING:
            fresh.append(stack.consuming())
            assert len(fresh) < 600, "the repair did not finish"
            time.sleep(0.05)
        assert all(fresh)
        assert stack.supervisor.child("worker").restarts == 0
