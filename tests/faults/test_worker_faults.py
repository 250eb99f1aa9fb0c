"""Faults: a real ``celery -A portal worker`` process on the test database and a private
Redis, SIGKILLed in the middle of each transitional step; its database connections dropped
mid-task; the broker restarted (empty) mid-task and down during a user's action. Afterwards
``clusters.progress.reconcile()`` runs with a short timeout and every object must be stable
and consistent, with the audit trail complete.

The worker runs one task at a time (prefork, concurrency 1, prefetch 1, acks late) and its
simulator's steps pass through a ``StepGate``: "mid-step" is a state the test waits for (the
step has started and is held at the gate), not a moment guessed by a sleep. The reconciler's
timeout is passed by moving its clock (``reconcile(now=…)``), not by waiting it out.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import progress as cluster_progress
from clusters import services as cluster_services
from clusters.models import STABLE, ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType
from portal.celery import app
from portal.compute.backends.simulator import StepGate
from portal.compute.models import SimulatorAllocation, SimulatorCapacity
from portal.foundation.errors import RuleViolation
from portal.models import AuditEvent
from tests.concurrency.invariants import structural_problems
from tests.faults.harness import (
    HANDS_A_POSTGRES_URL,
    Worker,
    broker,
    terminate_worker_connections,
    wait_until,
)
from vms import services as vm_services
from vms.models import VmStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, HANDS_A_POSTGRES_URL]

ADVANCE_CLUSTER = "clusters.tasks.advance_cluster"
ADVANCE_VM = "vms.tasks.advance_vm"


@pytest.fixture
def gate(tmp_path):
    """The workers' step gate, holding every step until a test opens it."""
    gate = StepGate(tmp_path / "gate")
    gate.close()
    yield gate
    gate.open()


def mid_step(gate, step):
    """Wait until a worker is inside ``step`` (started, held at the gate)."""
    wait_until(lambda: gate.started(step), 60, interval=0.02, what=f"a worker inside {step}")


@pytest.fixture
def lab(world, redis_server, tmp_path, settings, gate):
    """The world, this process sending real tasks to the private Redis, a worker factory."""
    redis_server.flush()
    world.capacity(64)
    workers = []

    def start_worker():
        worker = Worker(
            redis_server.url, tmp_path, step_seconds=0, SIMULATOR_STEP_GATE=gate.folder
        ).start()
        workers.append(worker)
        return worker

    with broker(app, redis_server.url):
        yield world, start_worker, redis_server
        for worker in workers:
            worker.kill()
    if not redis_server._answers():
        redis_server.start()


def quiet(worker, redis_server):
    """Nothing more will move by itself: the worker holds no task and the broker no message
    (looked at twice around the broker, so a message taken between the looks is seen)."""
    before = worker.tasks_in_hand()
    return not before and not redis_server.holds_messages() and worker.tasks_in_hand() == before


def status(obj):
    return type(obj).objects.values_list("status", flat=True).get(pk=obj.pk)


def reconcile_after_timeout(settings):
    """What the beat's reconciler does once the transition is older than its timeout (its
    clock moved past it, in this process where no step is gated)."""
    later = timezone.now() + timedelta(seconds=settings.TRANSITION_TIMEOUT_SECONDS + 1)
    return cluster_progress.reconcile(now=later)


def events(action, outcome=AuditEvent.Outcome.SUCCEEDED, **filters):
    return AuditEvent.objects.filter(action=action, outcome=outcome, **filters)


def start_held_at_allocate(world, start_worker, gate):
    """A two-member cluster's start with a worker inside its allocate step (held at the
    gate): (the cluster, the worker)."""
    cluster, _members = two_member_cluster(world)
    worker = start_worker()
    cluster_services.start_cluster(cluster.pk, actor=world.admin)
    mid_step(gate, "allocate")
    return cluster, worker


def two_member_cluster(world, name="fault"):
    cluster = world.cluster(name)
    members = world.members(cluster, 2)
    return cluster, members


def running_cluster(world, name="fault-run", member_status=VmStatus.STOPPED):
    """A RUNNING cluster as the tasks leave it: its fabric allocated and configured."""
    cluster = world.cluster(name, status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2, status=member_status)
    capacity = SimulatorCapacity.objects.get(
        zone=world.zone_a, instance_type=world.h100, fabric=FabricType.INFINIBAND
    )
    SimulatorAllocation.objects.create(cluster=cluster, capacity=capacity, nodes=2, configured=True)
    if member_status == VmStatus.RUNNING:
        for index, vm in enumerate(members):
            vm.fabric_guid, vm.fabric_lid = f"0x248a0703{vm.pk:08x}", index + 1
            vm.save(update_fields=["fabric_guid", "fabric_lid"])
    return cluster, members


def assert_consistent():
    assert structural_problems() == []


def assert_started_to_running(cluster, admin):
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING, cluster.last_error
    assert events("cluster.start", actor=admin, target_id=cluster.pk).exists()
    for step in ("cluster.allocated", "cluster.waiting", "cluster.running"):
        assert events(step, target_id=cluster.pk).exists(), step
    assert all(vm.fabric_guid for vm in cluster.members.all())


# ---------------------------------------------------------------------------------------------
# SIGKILL during each transitional step


def test_killed_while_provisioning_a_new_cluster(lab, settings, gate):
    world, start_worker, _redis = lab
    worker = start_worker()
    cluster = cluster_services.create_cluster(
        **world.new_cluster("fault-new"),
    )
    mid_step(gate, "register_cluster")
    worker.kill()
    assert status(cluster) == ClusterStatus.PROVISIONING  # killed inside register_cluster

    assert cluster.pk in reconcile_after_timeout(settings)
    assert status(cluster) == ClusterStatus.UNALLOCATED
    assert events("cluster.create", actor=world.admin, target_id=cluster.pk).exists()
    assert events("cluster.reconcile", target_id=cluster.pk).exists()
    assert events("cluster.provisioned", target_id=cluster.pk).exists()
    assert_consistent()


def test_killed_while_allocating(lab, settings, gate):
    world, start_worker, _redis = lab
    cluster, worker = start_held_at_allocate(world, start_worker, gate)
    worker.kill()
    assert status(cluster) == ClusterStatus.PROVISIONING  # killed inside allocate
    assert not SimulatorAllocation.objects.filter(cluster=cluster).exists()

    reconcile_after_timeout(settings)
    assert_started_to_running(cluster, world.admin)
    assert events("cluster.reconcile", target_id=cluster.pk).exists()
    assert_consistent()


def test_killed_while_allocated(lab, settings, gate):
    """Allocated has no backend call of its own: the worker dies with the next step queued.

    A VM start queued right behind the first step keeps the (one-task) worker busy for a
    step, so the cluster sits in 할당됨 with its next task waiting when the worker dies.
    """
    world, start_worker, _redis = lab
    cluster, _members = two_member_cluster(world)
    blocker = world.vm("blocker")
    gate.open()
    gate.close("start_vm")
    worker = start_worker()
    cluster_services.start_cluster(cluster.pk, actor=world.admin)
    vm_services.start_vm(blocker.pk, actor=world.admin)
    mid_step(gate, "start_vm")
    worker.kill()
    assert status(cluster) == ClusterStatus.ALLOCATED
    assert status(blocker) == VmStatus.STARTING

    reconcile_after_timeout(settings)
    assert_started_to_running(cluster, world.admin)
    assert status(blocker) == VmStatus.RUNNING
    assert events("vm.running", target_id=blocker.pk).exists()
    assert_consistent()


def test_killed_while_configuring_the_fabric(lab, settings, gate):
    world, start_worker, _redis = lab
    cluster, _members = two_member_cluster(world)
    gate.open()
    gate.close("configure_fabric")
    worker = start_worker()
    cluster_services.start_cluster(cluster.pk, actor=world.admin)
    mid_step(gate, "configure_fabric")
    worker.kill()
    assert status(cluster) == ClusterStatus.WAITING  # killed inside configure_fabric
    assert SimulatorAllocation.objects.filter(cluster=cluster, configured=False).exists()

    reconcile_after_timeout(settings)
    assert_started_to_running(cluster, world.admin)
    assert_consistent()


@pytest.mark.parametrize(
    ("action", "before", "during", "after", "settled"),
    [
        ("start", VmStatus.STOPPED, VmStatus.STARTING, VmStatus.RUNNING, "vm.running"),
        ("stop", VmStatus.RUNNING, VmStatus.STOPPING, VmStatus.STOPPED, "vm.stopped"),
    ],
    ids=["starts", "stops"],
)
def test_killed_while_a_member(lab, settings, gate, action, before, during, after, settled):
    world, start_worker, _redis = lab
    _cluster, (member, _other) = running_cluster(world, member_status=before)
    worker = start_worker()
    getattr(vm_services, f"{action}_vm")(member.pk, actor=world.admin)
    mid_step(gate, f"{action}_vm")
    worker.kill()
    assert status(member) == during

    reconcile_after_timeout(settings)
    member.refresh_from_db()
    assert member.status == after
    if after == VmStatus.RUNNING:
        assert member.fabric_guid
    assert events(f"vm.{action}", actor=world.admin, target_id=member.pk).exists()
    assert events(settled, target_id=member.pk).exists()
    assert_consistent()


# ---------------------------------------------------------------------------------------------
# The database connection dropped mid-task


def test_database_connection_dropped_mid_task(lab, settings, gate):
    world, start_worker, _redis = lab
    cluster, worker = start_held_at_allocate(world, start_worker, gate)
    assert terminate_worker_connections() >= 1
    gate.open()
    # The task's next query fails; the task retries (autoretry_for OperationalError) on a
    # fresh connection and the worker finishes the start by itself.
    wait_until(lambda: status(cluster) in STABLE, 25, interval=0.1, what="a stable status")
    assert worker.alive()
    assert "Retry in" in worker.output()  # the fault really hit the task
    worker.kill()

    reconcile_after_timeout(settings)
    assert_started_to_running(cluster, world.admin)
    assert_consistent()


# ---------------------------------------------------------------------------------------------
# The broker restarted (empty) mid-task, and down during a user's action


def test_broker_restarted_mid_task(lab, settings, gate):
    world, start_worker, redis_server = lab
    cluster, worker = start_held_at_allocate(world, start_worker, gate)
    redis_server.restart()  # no persistence: every queued message is gone
    gate.open()
    # Whatever the worker managed to queue may be lost; the reconciler finishes the job.
    wait_until(
        lambda: worker.output().count("Connected to redis") >= 2,
        20,
        interval=0.1,
        what="the worker to reconnect",
    )
    wait_until(
        lambda: status(cluster) != ClusterStatus.PROVISIONING and quiet(worker, redis_server),
        60,
        interval=0.1,
        what="the worker to end what it held and the broker to hold nothing",
    )
    reconcile_after_timeout(settings)
    assert_started_to_running(cluster, world.admin)

    # The worker and this process both came back: new work flows end to end again.
    fresh = cluster_services.create_cluster(
        **world.new_cluster("after-restart"),
    )
    wait_until(
        lambda: status(fresh) == ClusterStatus.UNALLOCATED,
        15,
        interval=0.1,
        what="the restarted broker to deliver",
    )
    assert worker.alive()
    assert_consistent()


def test_user_action_while_the_broker_is_down(lab, settings):
    world, _start_worker, redis_server = lab
    cluster, _members = two_member_cluster(world)
    redis_server.kill()
    try:
        cluster_services.start_cluster(cluster.pk, actor=world.admin)
    except RuleViolation:
        pytest.fail("start refused: the broker being down is not the user's problem")
    finally:
        redis_server.start()
    assert status(cluster) == ClusterStatus.PROVISIONING
    # The reconciler repairs what no task will: the start completes.
    reconcile_after_timeout(settings)
    assert_started_to_running(cluster, world.admin)
    assert_consistent()


def test_reconcile_rolls_back_a_start_the_backend_can_no_longer_serve(lab, settings, gate):
    """A worker dies in 준비중 and, meanwhile, the capacity is gone: the reconciler must not
    leave the cluster half-started; it returns to its previous stable status, fabric freed."""
    world, start_worker, _redis = lab
    cluster, worker = start_held_at_allocate(world, start_worker, gate)
    worker.kill()
    world.capacity(1)  # fewer nodes than the two members

    reconcile_after_timeout(settings)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.UNALLOCATED and cluster.last_error
    assert events("cluster.start", AuditEvent.Outcome.FAILED, target_id=cluster.pk).exists()
    assert not VirtualCluster.objects.filter(
        status__in=[ClusterStatus.PROVISIONING, ClusterStatus.ALLOCATED]
    ).exists()
    assert_consistent()
