"""The whole life of a cluster through real Celery tasks on Redis, handled by a real worker."""

import os
import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection

from clusters import services
from clusters.models import ClusterStatus
from portal.celery import app
from vms import services as vm_services
from vms.models import FabricType, VirtualMachine, VmStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
BROKER = os.environ.get("TEST_CELERY_BROKER_URL", "redis://127.0.0.1:6379/14")


def use_broker(**conf):
    """Point the app at another broker; drop the pools made for the previous one."""
    app.conf.update(conf)
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def worker(monkeypatch):
    # Celery reads CELERY_BROKER_URL from the environment before its configuration.
    monkeypatch.setenv("CELERY_BROKER_URL", BROKER)
    saved = {
        k: app.conf[k] for k in ("broker_url", "task_always_eager", "broker_transport_options")
    }
    use_broker(broker_url=BROKER, task_always_eager=False, broker_transport_options={})
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()  # nothing left over from an earlier run
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        yield
    use_broker(**saved)
    connection.close()


def wait_for(read, expected, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if value == expected:
            return
        time.sleep(0.05)
    raise AssertionError(f"still {value!r}, expected {expected!r}")


def test_full_lifecycle_through_the_worker(world, worker):
    admin = world.admin
    cluster = services.create_cluster(
        actor=admin,
        project=world.demo,
        name="worker-ib",
        zone_id=world.zone_a.pk,
        instance_type_id=world.h100.pk,
        fabric_type=FabricType.INFINIBAND,
    )
    status = lambda: type(cluster).objects.get(pk=cluster.pk).status  # noqa: E731
    vm_status = lambda vm: VirtualMachine.objects.get(pk=vm.pk).status  # noqa: E731
    wait_for(status, ClusterStatus.UNALLOCATED)

    a, b = world.vm("w1"), world.vm("w2")
    for vm in (a, b):
        services.attach_vm(vm.pk, cluster.pk, actor=admin)
    services.start_cluster(cluster.pk, actor=admin)
    wait_for(status, ClusterStatus.RUNNING)

    for vm in (a, b):
        vm_services.start_vm(vm.pk, actor=admin)
    for vm in (a, b):
        wait_for(lambda vm=vm: vm_status(vm), VmStatus.RUNNING)
    assert VirtualMachine.objects.get(pk=a.pk).fabric_guid

    for vm in (a, b):
        vm_services.stop_vm(vm.pk, actor=admin)
    for vm in (a, b):
        wait_for(lambda vm=vm: vm_status(vm), VmStatus.STOPPED)

    services.stop_cluster(cluster.pk, actor=admin)
    wait_for(status, ClusterStatus.TERMINATED)

    services.start_cluster(cluster.pk, actor=admin)
    wait_for(status, ClusterStatus.RUNNING)
    services.stop_cluster(cluster.pk, actor=admin)
    wait_for(status, ClusterStatus.TERMINATED)

    services.delete_cluster(cluster.pk, actor=admin)
    assert status() == ClusterStatus.DELETED
    assert not VirtualMachine.objects.filter(cluster_id=cluster.pk).exists()
