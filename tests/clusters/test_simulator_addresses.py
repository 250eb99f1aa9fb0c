"""The simulator's RoCE addresses are valid for clusters of up to 1,024 members and
never shared by two clusters that hold fabric at the same time."""

import ipaddress

import pytest

from clusters.models import VirtualCluster
from portal.catalog.models import FabricType
from portal.compute.backends.simulator import ROCE_BLOCKS, SimulatorBackend
from portal.compute.models import SimulatorAllocation
from portal.foundation.errors import CapacityUnavailable
from tests.clusters.test_races import race
from vms.models import BillingType, VirtualMachine, VmStatus

PRIVATE = ipaddress.ip_network("172.16.0.0/12")


def roce_cluster(world, name, pk=None, members=2):
    cluster = VirtualCluster.objects.create(
        pk=pk,
        project=world.demo,
        name=name,
        zone=world.zone_a,
        instance_type=world.h100,
        fabric_type=FabricType.ROCE_V2,
    )
    VirtualMachine.objects.bulk_create(
        VirtualMachine(
            project=world.demo,
            name=f"{name}-{i:04d}",
            zone=world.zone_a,
            instance_type=world.h100,
            billing_type=BillingType.ON_DEMAND,
            status=VmStatus.STOPPED,
            cluster=cluster,
        )
        for i in range(members)
    )
    return cluster


def configured(backend, cluster):
    members = list(cluster.members.order_by("pk"))
    backend.allocate(cluster, len(members))
    addresses = backend.configure_fabric(cluster, members)
    return [ipaddress.ip_address(address.ip) for address in addresses.values()]


def assert_one_subnet_of_hosts(ips):
    """Unique hosts of one subnet inside 172.16.0.0/12, none its network or broadcast."""
    assert len(set(ips)) == len(ips)
    subnet = ipaddress.ip_network(f"{min(ips)}/21", strict=False)
    assert subnet.subnet_of(PRIVATE)
    for ip in ips:
        assert ip in subnet and ip not in (subnet.network_address, subnet.broadcast_address)


@pytest.fixture
def backend(world):
    world.capacity(100_000, fabric=FabricType.ROCE_V2)
    return SimulatorBackend()


def test_a_1024_member_cluster_gets_1024_valid_unique_addresses(world, backend):
    ips = configured(backend, roce_cluster(world, "big", members=1024))
    assert len(ips) == 1024
    assert_one_subnet_of_hosts(ips)


def test_clusters_n_and_n_plus_4096_never_share_an_address(world, backend):
    first = configured(backend, roce_cluster(world, "n", pk=7, members=200))
    second = configured(backend, roce_cluster(world, "n4096", pk=7 + 4096, members=200))
    assert not set(first) & set(second)
    assert_one_subnet_of_hosts(first)
    assert_one_subnet_of_hosts(second)


@pytest.mark.slow
def test_every_block_in_use_refuses_the_next_cluster_and_a_release_frees_one(world, backend):
    clusters = [roce_cluster(world, f"c{i}") for i in range(ROCE_BLOCKS + 1)]
    seen = set()
    for cluster in clusters[:-1]:
        ips = configured(backend, cluster)
        assert not seen & set(ips)
        seen |= set(ips)
    with pytest.raises(CapacityUnavailable):
        backend.allocate(clusters[-1], 2)
    backend.release(clusters[0])
    assert_one_subnet_of_hosts(configured(backend, clusters[-1]))


def test_a_member_joining_a_running_cluster_gets_a_free_address_of_its_block(world, backend):
    cluster = roce_cluster(world, "grow", members=3)
    members = list(cluster.members.order_by("pk"))
    backend.allocate(cluster, 3)
    for vm, address in backend.configure_fabric(cluster, members).items():
        VirtualMachine.objects.filter(pk=vm).update(
            fabric_ip=address.ip, fabric_gid_index=address.gid_index
        )
    VirtualMachine.objects.filter(pk=members[1].pk).update(fabric_ip=None, cluster=None)
    backend.allocate(cluster, 3)
    joined = world.vm("joiner", cluster=cluster)
    address = backend.start_vm(joined, cluster)
    ips = [
        ipaddress.ip_address(ip)
        for ip in cluster.members.exclude(fabric_ip=None).values_list("fabric_ip", flat=True)
    ]
    assert ipaddress.ip_address(address.ip) not in ips
    assert_one_subnet_of_hosts([*ips, ipaddress.ip_address(address.ip)])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_clusters_of_different_pools_allocating_at_once_get_different_blocks(world, round_):
    """Pools don't share a lock: two allocations may pick the same free block at once."""
    clusters = []
    for zone in (world.zone_a, world.zone_b):
        for itype in (world.h100, world.l40s):
            world.capacity(8, zone=zone, instance_type=itype, fabric=FabricType.ROCE_V2)
            clusters.append(
                VirtualCluster.objects.create(
                    project=world.demo,
                    name=f"{zone.code}-{itype.code}",
                    zone=zone,
                    instance_type=itype,
                    fabric_type=FabricType.ROCE_V2,
                )
            )
    backend = SimulatorBackend()
    race(*[lambda c=c: backend.allocate(c, 2) for c in clusters])
    keys = SimulatorAllocation.objects.filter(cluster__in=clusters).values_list("pk", flat=True)
    assert len(set(keys)) == len(clusters)
