"""Starts of unrelated clusters do not serialise on the zone's GPU host rows (issue #42,
bench_fleet): a member whose place its cluster's allocation holds starts under its
cluster's lock alone, while another cluster's allocation holds every host of the zone."""

import threading
import time

import pytest
from django.db import connection, transaction

from clusters.models import VirtualCluster
from portal.catalog.models import FabricType
from portal.compute.backends.libvirt import LibvirtBackend, placement
from portal.compute.models.hosts import Placement
from tests.clusters.libvirt_world import commits, hosts  # noqa: F401 - fixtures
from tests.concurrency.test_mixed_operations import _lock_waiters


def _started_or_waiting(thread, timeout=30):
    """Until ``thread`` has ended or a transaction waits on a lock: which of the two."""
    deadline = time.monotonic() + timeout
    while thread.is_alive() and _lock_waiters() == 0:
        assert time.monotonic() < deadline, "neither done nor waiting"
        time.sleep(0.01)
    return "waiting" if thread.is_alive() else "done"


@pytest.mark.django_db(transaction=True)
def test_a_member_start_does_not_wait_for_another_clusters_host_locks(world, hosts):  # noqa: F811
    hosts.topology()
    cluster = world.cluster("a", instance_type=hosts.h100x4, status="PROVISIONING")
    member, _other = world.members(cluster, 2)
    LibvirtBackend().allocate(cluster, 2)
    holding, release = threading.Event(), threading.Event()
    errors = {}

    def allocation_of_another_cluster():
        """What another cluster's allocation holds: every enabled host of the zone."""
        try:
            with transaction.atomic():
                placement.lock_hosts(world.zone_a.pk, FabricType.INFINIBAND)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    def start_member():
        try:
            locked = VirtualCluster.objects.get(pk=cluster.pk)
            LibvirtBackend().start_vm(member, locked)
        except Exception as exc:  # reported below
            errors["start"] = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()

    holder = threading.Thread(target=allocation_of_another_cluster)
    holder.start()
    assert holding.wait(10)
    starter = threading.Thread(target=start_member)
    starter.start()
    try:
        assert _started_or_waiting(starter) == "done"
    finally:
        release.set()
        holder.join(30)
        starter.join(30)
    assert errors == {}
    placed = Placement.objects.select_related("domain_host").get(vm=member)
    assert placed.held and placed.cluster_id == cluster.pk and placed.domain_host is not None
