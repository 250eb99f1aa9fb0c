"""The simulator's allocation takes the cluster before the pool (found by the storm).

PostgreSQL checks foreign keys at commit (Django makes them DEFERRABLE INITIALLY DEFERRED):
an allocation inserted under the pool's lock then needed a share lock on its cluster at
COMMIT. The deadlock in the server log, made deterministic:

1. an attach holds cluster C and waits for VM v;
2. another attach holds v (and its own running cluster) and waits for the pool;
3. a start's allocation of C holds the pool and, committing, waits for C.
"""

import threading

import pytest
from django.db import connection, transaction

from clusters.models import SimulatorCapacity, VirtualCluster
from portal.compute.backends.simulator import SimulatorBackend
from tests.concurrency.test_mixed_operations import _wait_for_waiters
from vms.models import VirtualMachine


@pytest.mark.django_db(transaction=True)
def test_allocation_locks_the_cluster_before_the_pool(world):
    world.capacity(10)
    cluster = world.cluster("c")
    vm = world.vm("v")
    pool = SimulatorCapacity.objects.get()
    errors = {}
    cluster_held, vm_held = threading.Event(), threading.Event()
    ask_pool, ask_vm = threading.Event(), threading.Event()

    def run(name, fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a deadlock is what we look for
            errors[name] = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()

    def attach_holding_the_cluster():
        with transaction.atomic():
            VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
            cluster_held.set()
            ask_vm.wait(10)
            VirtualMachine.objects.select_for_update().get(pk=vm.pk)

    def attach_holding_the_vm():
        with transaction.atomic():
            VirtualMachine.objects.select_for_update().get(pk=vm.pk)
            vm_held.set()
            ask_pool.wait(10)
            SimulatorCapacity.objects.select_for_update().get(pk=pool.pk)

    connection.close()
    first = threading.Thread(target=run, args=("attach C", attach_holding_the_cluster))
    second = threading.Thread(target=run, args=("attach v", attach_holding_the_vm))
    first.start()
    second.start()
    assert cluster_held.wait(10) and vm_held.wait(10)
    allocation = threading.Thread(
        target=run,
        args=(
            "allocate",
            lambda: SimulatorBackend().allocate(VirtualCluster.objects.get(pk=cluster.pk), 2),
        ),
    )
    allocation.start()
    _wait_for_waiters(1)  # the allocation waits: for C (fixed) or at its COMMIT (before)
    ask_pool.set()
    ask_vm.set()
    for thread in (first, second, allocation):
        thread.join(30)
    assert errors == {}
    assert not any(t.is_alive() for t in (first, second, allocation))
