"""No single SIGKILL wedges the portal, on either broker.

A supervised worker (prefork, two children), the reconciler's worker and beat run as real
processes, as ``rundemo`` runs them, with a short transition timeout and reconcile period
(``tests.faults.stack``).
One process of the stack is SIGKILLed while a two-member cluster starts: the web process
right after it committed (before it could queue the task), or, once the first step has
started (seen at the simulator's gate), the worker's main process, both of its pool
children, the reconciler's worker, or beat.
Then no cluster or VM may stay transitional longer than TRANSITION_TIMEOUT_SECONDS + 2 ×
RECONCILE_EVERY_SECONDS, the killed process comes back, and the worker consumes again (a
heartbeat stamped after the kill).
"""

import os
import signal
import time

import pytest

from clusters import services as cluster_services
from clusters.models import ClusterStatus, VirtualCluster
from portal.compute.backends.simulator import StepGate
from portal.processes import heartbeat
from tests.faults.harness import HANDS_A_POSTGRES_URL, children_of, wait_until
from tests.faults.stack import (
    BOUND,
    running_stack,
    start_a_vm_through_the_worker,
    start_in_a_web_process_that_dies_after_commit,
    transitional_seconds,
)
from vms.models import VirtualMachine

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, HANDS_A_POSTGRES_URL]

VICTIMS = ["web", "worker-main", "worker-children", "reconciler", "beat"]


@pytest.fixture
def gate(tmp_path):
    return StepGate(tmp_path / "gate")


@pytest.fixture(params=["filesystem", "redis"])
def stack(request, world, tmp_path, gate):
    world.capacity(64)
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        url = server.url
    else:
        url = "filesystem://"
    with running_stack(url, tmp_path, SIMULATOR_STEP_GATE=gate.folder) as running:
        yield world, running


def states(cluster):
    return [
        *VirtualCluster.objects.filter(pk=cluster.pk).values_list("status", flat=True),
        *VirtualMachine.objects.values_list("status", flat=True),
    ]


@pytest.mark.parametrize("victim", VICTIMS)
def test_no_single_sigkill_leaves_a_cluster_transitional(stack, gate, victim):
    world, stack = stack
    cluster = world.cluster("fault")
    world.members(cluster, 2)
    before = {name: stack.pid(name) for name in ("worker", "reconciler", "beat")}

    if victim == "web":
        start_in_a_web_process_that_dies_after_commit(stack, cluster, world.admin)
    else:
        # Killed once the first step has started (its marker at the simulator's gate; the
        # step is not held: a held pool would be taken for a wedged one and restarted).
        pool = stack.pool()
        cluster_services.start_cluster(cluster.pk, actor=world.admin)
        wait_until(gate.started, 60, interval=0.01, what="the first step to start")
        pids = {
            "worker-main": [before["worker"]],
            "worker-children": pool,
            "reconciler": [before["reconciler"]],
            "beat": [before["beat"]],
        }[victim]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    killed = time.time()

    took = transitional_seconds(lambda: states(cluster), timeout=BOUND + 20)
    assert took <= BOUND, f"transitional for {took:.1f}s, bound {BOUND}s"
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.RUNNING

    # What was killed is back, and the worker consumes again: new work flows end to end.
    if victim in ("worker-main", "reconciler", "beat"):
        name = victim.split("-")[0]
        wait_until(lambda: stack.pid(name) != before[name], 5, what=f"{name} restarted")
    stack.wait_consumed_since(killed, "the worker to consume again")
    start_a_vm_through_the_worker(world)


def test_a_long_repair_does_not_starve_the_worker_heartbeat(world, tmp_path):
    """The reconciler repairs on a worker of its own: while a repair is held mid-step, beat
    keeps queueing the heartbeat and the idle worker keeps stamping it, so the worker is not
    taken for a wedged one (and SIGKILLed by the supervisor).

    Decided by state, not by a step longer than the heartbeat's max age: the simulator's
    step gate holds the reconciler's repair at its first step until the heartbeat has been
    stamped three more times. Were the repair run on the worker's own queue, its two pool
    processes would be the only ones to stamp it. The supervisor's stall limit is set far
    above any scheduling delay of a loaded machine: the stamps, not a margin, are what this
    test looks at."""
    world.capacity(64)
    gate = StepGate(tmp_path / "gate")
    gate.close()
    with running_stack(
        "filesystem://", tmp_path, heartbeat_max_age=120, SIMULATOR_STEP_GATE=gate.folder
    ) as stack:
        cluster = world.cluster("slow")
        world.members(cluster, 2)
        start_in_a_web_process_that_dies_after_commit(stack, cluster, world.admin)

        def repairing():
            pids = {stack.pid("reconciler"), *children_of(stack.pid("reconciler"))}
            return any(f"-{pid}-" in marker for marker in gate.started() for pid in pids)

        wait_until(repairing, 120, interval=0.1, what="the reconciler's repair's first step")
        stamps = set()

        def stamped_three_more_times():
            stamps.add(heartbeat_stamp())
            return len(stamps) >= 4

        wait_until(stamped_three_more_times, 120, interval=0.05, what="heartbeats mid-repair")
        assert VirtualCluster.objects.get(pk=cluster.pk).status != ClusterStatus.RUNNING
        assert len(gate.started()) == 1  # still held at its first step
        gate.open()
        wait_until(
            lambda: VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.RUNNING,
            120,
            interval=0.1,
            what="the repair to finish",
        )
        # Never taken for a wedged worker. (A restart after kombu's filesystem transport
        # read its exchange table while the other process was writing it, at start-up on a
        # loaded machine, is the supervisor doing its job, not this test's concern.)
        assert "consumed nothing for too long" not in stack.supervisor.child("worker").history


def heartbeat_stamp():
    """When the worker last stamped its heartbeat, exactly (the stamp file's mtime on the
    filesystem broker); None before the first time."""
    try:
        return heartbeat._file().stat().st_mtime_ns
    except FileNotFoundError:
        return None
