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

from clusters.models import VirtualCluster
from portal.compute.backends.simulator import SimulatorBackend
from portal.compute.models import SimulatorCapacity
from tests.concurrency.test_mixed_operations import _wait_for_waiters


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
        except Exception as exc:  # a deadlock is what we look for
            errors[name] = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()

    def hold_then_take(first, held, asked, then):
        """An attach's transaction: lock row ``first``, say so, and once asked lock ``then``."""
        with transaction.atomic():
            type(first).objects.select_for_update().get(pk=first.pk)
            held.set()
            asked.wait(10)
            type(then).objects.select_for_update().get(pk=then.pk)

    connection.close()
    first = threading.Thread(
        target=run,
        args=("attach C", lambda: hold_then_take(cluster, cluster_held, ask_vm, vm)),
    )
    second = threading.Thread(
        target=run, args=("attach v", lambda: hold_then_take(vm, vm_held, ask_pool, pool))
    )
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
