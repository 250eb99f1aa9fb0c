"""The whole life of a cluster through real Celery tasks on Redis, handled by a real worker."""

import pytest

from clusters import services
from clusters.models import ClusterStatus
from tests.faults.harness import wait_until
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def wait_for(read, expected, timeout=60):
    """Wait until ``read()`` is ``expected``; the timeout only ends a test that went wrong."""
    wait_until(lambda: read() == expected, timeout, interval=0.05, what=f"{expected!r}")


def test_full_lifecycle_through_the_worker(world, redis_worker):
    admin = world.admin
    cluster = services.create_cluster(**world.new_cluster("worker-ib"))
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
