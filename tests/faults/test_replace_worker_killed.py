"""A 교체 whose worker is SIGKILLed between its steps is finished by the portal's own
recovery: a new worker, the reconciler (its clock moved past the transition timeout, as in
``test_worker_faults``) and the beat's look at open operations (``clusters.tasks.watch_stale``,
sent to the new worker as beat sends it).

A replace of a running member of a running cluster walks four steps, each its own task: the
member's stop (``vms.tasks.advance_vm``), the swap (``clusters.tasks.advance_replace``), the
spare's start (``advance_vm``) and the end (``advance_replace``). The worker is killed with
the last step before one of them recorded and that one not begun: held inside a simulator
step at the ``StepGate``, or held at its first lock (the Operation row, taken by the test).
What the test waits for before the kill is a state, never a time.
"""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from clusters import operations, tasks
from clusters import progress as cluster_progress
from clusters.models import Operation, OperationItem
from portal.celery import app
from portal.compute.backends.simulator import StepGate
from portal.foundation.broker import publish
from portal.models import AuditEvent
from tests.concurrency.replace_checks import (
    RowLock,
    ranks_of,
    replace_problems,
    running_cluster,
    wait_settled,
)
from tests.faults.harness import HANDS_A_POSTGRES_URL, Worker, broker, wait_until
from vms.models import VirtualMachine, VmStatus

pytestmark = HANDS_A_POSTGRES_URL

Item = OperationItem.Status


@pytest.fixture
def gate(tmp_path):
    gate = StepGate(tmp_path / "gate")
    yield gate
    gate.open()


@pytest.fixture
def lab(world, redis_server, tmp_path, gate):
    """A running cluster of three running members and a spare, made (eagerly) before this
    process sends real tasks to the private Redis; a factory of workers on it."""
    redis_server.flush()
    cluster, members = running_cluster(world)
    spare = world.vm("spare")
    workers = []

    def start_worker():
        worker = Worker(redis_server.url, tmp_path, step_seconds=0, SIMULATOR_STEP_GATE=gate.folder)
        workers.append(worker.start())
        return worker

    with broker(app, redis_server.url):
        yield SimpleNamespace(
            world=world,
            cluster=cluster,
            member=members[0],
            spare=spare,
            before=ranks_of(cluster),
            start_worker=start_worker,
        )
        for worker in workers:
            worker.kill()


def status(vm):
    return VirtualMachine.objects.values_list("status", flat=True).get(pk=vm.pk)


def items(operation):
    return list(operation.items.order_by("position").values_list("status", flat=True))


def mid_step(gate, step):
    wait_until(lambda: gate.started(step), 60, interval=0.02, what=f"a worker inside {step}")


def replace(lab):
    return operations.replace_member(
        lab.cluster.pk, lab.member.pk, lab.spare.pk, actor=lab.world.admin
    )


def killed_inside(lab, gate, step):
    """The worker killed inside the simulator's ``step`` (held at the gate)."""
    gate.close(step)
    worker = lab.start_worker()
    operation = replace(lab)
    mid_step(gate, step)
    worker.kill()
    return operation


def killed_after(lab, gate, step):
    """The worker killed once ``step`` is recorded, as its next task (``advance_replace``)
    waits for the Operation row the test holds."""
    gate.close(step)
    worker = lab.start_worker()
    operation = replace(lab)
    mid_step(gate, step)
    held = RowLock(Operation, operation.pk).take()
    try:
        gate.open()
        held.wait_for_waiter("the next step to wait at the Operation row")
        worker.kill()
    finally:
        held.release()
    return operation


def recover(settings):
    """What the portal does by itself once a worker is back: the reconciler past the
    timeout (here, its clock moved), then the beat's look at open operations."""
    reconcile_after_timeout(settings)
    assert publish("clusters.tasks.watch_stale")


def reconcile_after_timeout(settings):
    later = timezone.now() + timedelta(seconds=settings.TRANSITION_TIMEOUT_SECONDS + 1)
    cluster_progress.reconcile(now=later)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_killed_inside_the_members_stop(lab, gate, settings):
    operation = killed_inside(lab, gate, "stop_vm")
    assert status(lab.member) == VmStatus.STOPPING
    assert items(operation) == [Item.PENDING, Item.PENDING]
    assert_recovered(lab, operation, settings)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_killed_after_the_members_stop_before_the_swap(lab, gate, settings):
    operation = killed_after(lab, gate, "stop_vm")
    assert status(lab.member) == VmStatus.STOPPED
    assert VirtualMachine.objects.get(pk=lab.member.pk).cluster_id == lab.cluster.pk
    assert items(operation) == [Item.PENDING, Item.PENDING]
    assert_recovered(lab, operation, settings)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_killed_inside_the_spares_start_after_the_swap(lab, gate, settings):
    operation = killed_inside(lab, gate, "start_vm")
    assert status(lab.spare) == VmStatus.STARTING
    assert ranks_of(lab.cluster)[lab.spare.pk] == lab.before[lab.member.pk]
    assert items(operation) == [Item.SUCCEEDED, Item.PENDING]
    assert_recovered(lab, operation, settings)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_killed_after_the_spares_start_before_the_end(lab, gate, settings):
    operation = killed_after(lab, gate, "start_vm")
    assert status(lab.spare) == VmStatus.RUNNING
    assert items(operation) == [Item.SUCCEEDED, Item.PENDING]
    assert not Operation.objects.get(pk=operation.pk).done
    assert_recovered(lab, operation, settings)


def assert_recovered(lab, operation, settings):
    lab.start_worker()
    recover(settings)
    wait_settled()
    operation.refresh_from_db()
    assert operation.done and operation.error_code == "", operation.error_code
    assert items(operation) == [Item.SUCCEEDED, Item.SUCCEEDED]
    assert (status(lab.member), status(lab.spare)) == (VmStatus.STOPPED, VmStatus.RUNNING)
    assert replace_problems(lab.cluster, lab.before) == []
    settled_events = AuditEvent.objects.filter(outcome=AuditEvent.Outcome.SUCCEEDED)
    assert settled_events.filter(action="vm.stopped", target_id=lab.member.pk).count() == 1
    assert settled_events.filter(action="vm.running", target_id=lab.spare.pk).count() == 1


def test_the_beat_finishes_a_replace_whose_every_task_was_lost(
    world, settings, django_capture_on_commit_callbacks
):
    """No worker at all: the replace's tasks are never sent (captured, dropped). The
    reconciler stops the member; the beat's look at open operations does the rest."""
    cluster, (a, *_) = running_cluster(
        world, commits=lambda: django_capture_on_commit_callbacks(execute=True)
    )
    spare = world.vm("spare")
    before = ranks_of(cluster)
    with django_capture_on_commit_callbacks():  # lost: the stop's step and the walk
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    reconcile_after_timeout(settings)
    assert status(a) == VmStatus.STOPPED and items(operation) == [Item.PENDING, Item.PENDING]
    with django_capture_on_commit_callbacks(execute=True):
        tasks.watch_stale()
    operation.refresh_from_db()
    assert operation.done and operation.error_code == "", operation.error_code
    assert (status(a), status(spare)) == (VmStatus.STOPPED, VmStatus.RUNNING)
    assert replace_problems(cluster, before) == []
