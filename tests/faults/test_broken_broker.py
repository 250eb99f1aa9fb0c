"""A broken broker never turns a saved change into a 500.

The embedded broker is three folders under var/celery. With ``var/celery/queue`` moved away
a publish used to raise (FileNotFoundError / ChannelError) after the change had committed,
so starting a VM or creating a cluster answered 500; the worker died on the same error and
beat logged SchedulingError, while /healthz still said "broker": "ok".
"""

import json
import shutil
import time

import pytest
from django.urls import reverse

from clusters import progress as cluster_progress
from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType
from portal.celery import app
from portal.foundation.broker import ensure_folders
from tests.faults.harness import HANDS_A_POSTGRES_URL, broker, filesystem_options, wait_until
from tests.faults.stack import STARTUP_GRACE, running_stack, start_a_vm_through_the_worker
from vms.models import VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def filesystem_broker(tmp_path):
    """This process publishing to a filesystem broker of its own; yields its queue folder."""
    options = filesystem_options(tmp_path / "var")
    with broker(app, "filesystem://", options):
        ensure_folders()  # what portal.settings does at start
        yield tmp_path / "var" / "celery" / "queue"


def messages(queue):
    return sorted(queue.glob("*.msg")) if queue.is_dir() else []


def block(queue):
    """Make the queue folder impossible: moved away, and a file where it was."""
    shutil.move(queue, queue.with_name("queue.moved"))
    queue.write_text("not a folder")


def test_a_moved_queue_folder_is_made_again_and_the_change_is_sent(filesystem_broker, login, world):
    queue = filesystem_broker
    client = login("admin")
    vm = world.vm("n1")
    shutil.move(queue, queue.with_name("queue.moved"))

    response = client.post(reverse("vms:vm_start", args=[vm.pk]))

    assert response.status_code == 302
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.STARTING
    # The folder is back and holds the step (and the watch of the start's Operation).
    tasks = [json.loads(m.read_text())["headers"]["task"] for m in messages(queue)]
    assert sorted(tasks) == ["clusters.tasks.watch", "vms.tasks.advance_vm"]


def test_a_broker_that_cannot_take_messages_leaves_the_work_to_the_reconciler(
    filesystem_broker, login, world, settings
):
    queue = filesystem_broker
    client = login("admin")
    vm = world.vm("n1")
    block(queue)
    assert client.get(reverse("healthz")).status_code == 503
    assert client.get(reverse("healthz")).json()["broker"].startswith("error")

    started = client.post(reverse("vms:vm_start", args=[vm.pk]))
    created = client.post(
        reverse("clusters:cluster_create"),
        {
            "name": "while-broken",
            "zone": world.zone_a.pk,
            "instance_type": world.h100.pk,
            "fabric_type": FabricType.INFINIBAND,
        },
    )

    assert started.status_code == 302 and created.status_code == 302
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.STARTING
    cluster = VirtualCluster.objects.get(name="while-broken")
    assert cluster.status == ClusterStatus.PROVISIONING

    queue.unlink()  # the broker is back: the reconciler picks the work up
    assert client.get(reverse("healthz")).json()["broker"] == "ok"
    settings.TRANSITION_TIMEOUT_SECONDS = 0
    cluster_progress.reconcile()
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.RUNNING
    assert VirtualCluster.objects.get(pk=cluster.pk).status == ClusterStatus.UNALLOCATED


@pytest.mark.slow
@HANDS_A_POSTGRES_URL
def test_the_worker_and_beat_outlive_a_moved_queue_folder(world, tmp_path):
    world.capacity(64)
    with running_stack("filesystem://", tmp_path) as stack:
        queue = stack.var_dir / "celery" / "queue"
        moved = time.time()
        shutil.move(queue, queue.with_name("queue.moved"))
        # The next publish (beat's heartbeat request) makes the folder again.
        wait_until(
            lambda: queue.is_dir() and stack.consumed_since(moved),
            STARTUP_GRACE,
            interval=0.05,
            what="the worker to consume from the remade folder",
        )
        start_a_vm_through_the_worker(world, "after-move")
        assert "SchedulingError" not in stack.output("beat")

        # A folder that cannot be made: the worker dies on it and is restarted (with a
        # growing delay) until the broker is back; beat logs its failed sends and carries on.
        worker = stack.supervisor.child("worker")
        block(queue)
        wait_until(lambda: worker.restarts >= 1, 10, interval=0.1, what="the worker to die")
        unblocked = time.time()
        queue.unlink()
        stack.wait_consumed_since(unblocked, "the restarted worker to consume")
        start_a_vm_through_the_worker(world, "after-block")
        assert stack.supervisor.child("beat").restarts == 0
