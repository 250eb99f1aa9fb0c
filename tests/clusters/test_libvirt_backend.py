"""The libvirt backend against libvirt's test driver (the fast tier): capacity, placement by
leaf and NUMA, the InfiniBand and RoCE domain XML, idempotency, delete leaving nothing."""

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.utils import translation

from clusters import services as cluster_services
from clusters.models import ClusterStatus
from portal.catalog.models import FabricType
from portal.compute.backends.libvirt import LibvirtBackend, domain, management, names
from portal.compute.models.hosts import FabricPartition, HostDevice, Placement
from portal.foundation.errors import CapacityUnavailable
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db


def running_cluster(world, hosts, n, fabric=FabricType.INFINIBAND, name="train", itype=None):
    cluster = world.cluster(
        name, fabric_type=fabric, instance_type=itype or hosts.h100x4, status="UNALLOCATED"
    )
    members = world.members(cluster, n)
    cluster_services.start_cluster(cluster.pk, actor=world.admin)  # eager: every step
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING, cluster.error_code
    return cluster, members


def dom_xml(hosts, vm):
    placed = Placement.objects.select_related("domain_host").get(vm=vm)
    dom = hosts.conn(placed.domain_host).lookupByName(names.domain_name(vm.pk))
    return dom, ET.fromstring(dom.XMLDesc(0))


def test_inventory_and_capacity(world, hosts):
    hosts.topology()
    backend = LibvirtBackend()
    assert HostDevice.objects.filter(kind="GPU", vendor="0x10de").count() == 32
    assert HostDevice.objects.filter(kind="VF").exclude(parent="").count() == 32
    # 4 GPUs + a VF per NUMA node: 2 members a host; an 8-GPU type spans both: 1 a host.
    assert backend.capacity(world.zone_a, hosts.h100x4, FabricType.INFINIBAND).free_nodes == 8
    assert backend.capacity(world.zone_a, world.h100, FabricType.INFINIBAND).free_nodes == 4
    assert backend.capacity(world.zone_a, hosts.h100x4, FabricType.ROCE_V2).total_nodes == 0
    running_cluster(world, hosts, 3)
    cap = backend.capacity(world.zone_a, hosts.h100x4, FabricType.INFINIBAND)
    assert (cap.total_nodes, cap.free_nodes) == (8, 5)
    # 동기화 again changes nothing; a draining host takes no new members.
    from portal.compute.backends.libvirt.inventory import sync_all
    from portal.compute.models.hosts import GpuHost

    assert sync_all() == {"h0": "16", "h1": "16", "h2": "16", "h3": "16"}
    assert HostDevice.objects.count() == 64
    GpuHost.objects.filter(name="h3").update(state=GpuHost.State.DRAINING)
    cap = backend.capacity(world.zone_a, hosts.h100x4, FabricType.INFINIBAND)
    assert (cap.total_nodes, cap.free_nodes) == (6, 3)


def test_capacity_error_names_what_is_short(world, hosts):
    hosts.topology()
    cluster = world.cluster("big", instance_type=hosts.h100x4)
    world.members(cluster, 9)
    with pytest.raises(CapacityUnavailable) as caught:
        LibvirtBackend().allocate(cluster, 9)
    params = dict(caught.value.params)
    room = params.pop("room")  # the other zones with room for 9 (none has hosts here)
    assert params == {
        "zone": "kr-central-1a",
        "instance_type": "H100",
        "fabric": "InfiniBand",
        "requested": 9,
        "available": 8,
    }
    assert room == []
    with translation.override("ko"):
        assert "요청 9노드, 가용 8노드" in caught.value.message
    assert not Placement.objects.exists() and not FabricPartition.objects.exists()


def test_placement_by_leaf_then_block_and_numa(world, hosts):
    hosts.topology()
    first, members = running_cluster(world, hosts, 4, name="a")
    placed = Placement.objects.filter(cluster=first).select_related("host")
    assert {p.host.leaf for p in placed} == {"l1"}  # l1 (h0, h1) holds all four
    for p in placed:
        devices = list(p.devices.all())
        assert sorted(d.kind for d in devices) == ["GPU"] * 4 + ["VF"]
        assert {d.numa_node for d in devices} == {p.numa_node}
    second, _ = running_cluster(world, hosts, 3, name="b")
    hosts_of_second = {p.host.name for p in Placement.objects.filter(cluster=second)}
    assert hosts_of_second == {"h2", "h3"}  # no leaf has 3 left: block b1 has 2, so anywhere


def test_infiniband_domain_xml(world, hosts):
    hosts.topology()
    cluster, members = running_cluster(world, hosts, 2)
    vm = members[0]
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.status == VmStatus.RUNNING and vm.fabric_guid and vm.fabric_lid
    dom, root = dom_xml(hosts, vm)
    assert dom.isActive() and root.findtext("uuid") == names.domain_uuid(vm.pk)
    meta = root.find(f"metadata/{{{domain.NAMESPACE}}}vm")
    assert meta.findtext(f"{{{domain.NAMESPACE}}}cluster") == str(cluster.pk)
    hostdevs = root.findall("devices/hostdev[@mode='subsystem'][@type='pci'][@managed='yes']")
    placed = Placement.objects.get(vm=vm)
    expected = {d.address for d in placed.devices.all()}
    got = {
        "{:04x}:{:02x}:{:02x}.{:x}".format(
            *(int(a.get(k), 16) for k in ("domain", "bus", "slot", "function"))
        )
        for a in (h.find("source/address") for h in hostdevs)
    }
    assert got == expected and len(got) == 5  # 4 GPUs + the VF, as plain hostdevs
    assert root.find("devices/interface[@type='hostdev']") is None
    assert root.find("numatune/memory").get("nodeset") == str(placed.numa_node)
    (mgmt,) = root.findall("devices/interface[@type='network']")
    assert mgmt.find("source").get("network") == management.network_name()
    assert mgmt.find("filterref").get("filter") == management.filter_name()


HOSTILE = "a<b>'c\"d&amp;e]]>f<!--g--><![CDATA[h]]>\u00e9\ud55c"


def test_hostile_values_round_trip_through_the_metadata(world, hosts):
    """A VM name holding markup (``<``, quotes, ``&``, ``]]>``, a comment, a CDATA opener)
    reads back from libvirt exactly as it was, and the domain is what the portal built: the
    document stays well formed and no value adds an element or an attribute."""
    hosts.add("h0")
    vm = world.vm(HOSTILE, instance_type=hosts.h100x4)  # stored around the name rule
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.status == VmStatus.RUNNING, vm.error_code
    _dom, root = dom_xml(hosts, vm)
    meta = root.find(f"metadata/{{{domain.NAMESPACE}}}vm")
    assert meta.findtext(f"{{{domain.NAMESPACE}}}name") == HOSTILE
    assert [child.tag.split("}")[1] for child in meta] == ["id", "project", "cluster", "name"]
    assert meta.findtext(f"{{{domain.NAMESPACE}}}id") == str(vm.pk)
    assert root.findtext("name") == names.domain_name(vm.pk)
    # What the portal hands libvirt parses by itself, says the same, and has the shape of a
    # plain VM's document: no value added an element or an attribute.
    placed = Placement.objects.select_related("host").get(vm=vm)

    def built(name, text):
        vm.name = name
        boot = SimpleNamespace(kernel=f"/boot/{text}", initrd="", cmdline=text)
        return ET.fromstring(
            domain.build(
                vm,
                host=placed.host,
                domain_type="test",
                placement=placed,
                gpus=[],
                vf=None,
                partition=None,
                boot=boot,
                memory_mib=1024,
                vcpus=1,
            )
        )

    hostile, plain = built(HOSTILE, HOSTILE), built("plain", "plain")
    ns = f"{{{domain.NAMESPACE}}}"
    assert hostile.findtext(f"metadata/{ns}vm/{ns}name") == HOSTILE
    assert hostile.findtext("os/kernel") == f"/boot/{HOSTILE}"
    assert hostile.findtext("os/cmdline") == HOSTILE

    def shape(root):
        return [(el.tag, sorted(el.attrib)) for el in root.iter()]

    assert shape(hostile) == shape(plain)


def test_roce_domain_xml(world, hosts):
    hosts.topology(FabricType.ROCE_V2)
    cluster, members = running_cluster(world, hosts, 2, FabricType.ROCE_V2)
    vm = members[1]
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    partition = FabricPartition.objects.get(cluster=cluster)
    assert vm.fabric_ip and vm.fabric_gid_index == 3 and partition.vlan
    _dom, root = dom_xml(hosts, vm)
    (nic,) = root.findall("devices/interface[@type='hostdev']")
    assert nic.find("vlan/tag").get("id") == str(partition.vlan)
    assert len(root.findall("devices/hostdev")) == 4  # the GPUs; the VF is the interface


def test_every_method_twice(world, hosts):
    hosts.topology()
    backend = LibvirtBackend()
    cluster = world.cluster("twice", instance_type=hosts.h100x4)
    members = world.members(cluster, 2)
    for _ in range(2):
        backend.register_cluster(cluster)
    for _ in range(2):
        backend.allocate(cluster, 2)
    assert Placement.objects.filter(cluster=cluster, held=True).count() == 2
    taken = set(HostDevice.objects.filter(placement__isnull=False).values_list("pk", flat=True))
    assert len(taken) == 10
    cluster.status = ClusterStatus.RUNNING
    cluster.save()
    first = backend.configure_fabric(cluster, members)
    assert backend.configure_fabric(cluster, members) == first
    vm = members[0]
    assert backend.start_vm(vm, cluster) == backend.start_vm(vm, cluster)
    assert (
        set(HostDevice.objects.filter(placement__isnull=False).values_list("pk", flat=True))
        == taken
    )
    for _ in range(2):
        backend.stop_vm(vm)
    dom, _root = dom_xml(hosts, vm)
    assert not dom.isActive()
    VirtualMachine.objects.filter(pk=vm.pk).update(cluster=None)
    for _ in range(2):
        backend.leave_cluster(vm, cluster)
    for _ in range(2):
        backend.release(cluster)
    assert not HostDevice.objects.filter(placement__isnull=False).exists()
    assert backend.allocated_cluster_ids() == []
    for _ in range(2):
        backend.delete_vm(vm)
    assert not Placement.objects.filter(vm=vm).exists()


def test_delete_leaves_nothing(world, hosts):
    hosts.topology()
    cluster, members = running_cluster(world, hosts, 2, itype=world.h100)
    for vm in members:
        vm_services.start_vm(vm.pk, actor=world.admin)
    for vm in members:
        vm_services.stop_vm(vm.pk, actor=world.admin)
    cluster_services.stop_cluster(cluster.pk, actor=world.admin)
    cluster_services.delete_cluster(cluster.pk, actor=world.admin)
    for vm in members:
        vm_services.delete_vm(vm.pk, actor=world.admin)
    ours = f"{settings.LIBVIRT_NAME_PREFIX}-"
    for h in hosts_all(hosts):
        conn = hosts.conn(h)
        assert [d.name() for d in conn.listAllDomains(0) if d.name().startswith(ours)] == []
        nets = [n.name() for n in conn.listAllNetworks() if n.name().startswith(ours)]
        assert set(nets) <= {management.network_name()}  # the host's own, for its guests
        pool = conn.storagePoolLookupByName(h.storage_pool)
        assert [v for v in pool.listVolumes() if v.startswith(ours)] == []
    assert not Placement.objects.exists() and not FabricPartition.objects.exists()
    assert not HostDevice.objects.filter(placement__isnull=False).exists()


def hosts_all(hosts):
    from portal.compute.models.hosts import GpuHost

    return list(GpuHost.objects.all())


def test_a_device_gone_from_its_host_leaves_the_inventory(world, hosts):
    from portal.compute.backends.libvirt import connection
    from portal.compute.backends.libvirt.inventory import sync_host
    from tests.libvirt_testhost import host_xml

    host = hosts.add("h0")
    cluster = world.cluster("gone", instance_type=hosts.h100x4)
    world.members(cluster, 1)
    LibvirtBackend().allocate(cluster, 1)  # NUMA node 0: GPUs 0-3 and a VF
    path = host.uri.removeprefix("test://")
    with open(path, "w") as f:
        f.write(host_xml(gpus=0, vfs=0))  # the host now shows no GPUs and no VFs
    connection.forget(host.uri)
    sync_host(host)
    left = HostDevice.objects.filter(host=host)
    assert left.count() == 5 and all(d.missing for d in left)  # the placed ones, until...
    cap = LibvirtBackend().capacity(world.zone_a, hosts.h100x4, FabricType.INFINIBAND)
    assert (cap.total_nodes, cap.free_nodes) == (0, 0)
    LibvirtBackend().release(cluster)  # ...their placement ends
    assert not HostDevice.objects.filter(host=host).exists()


def test_each_allocated_cluster_gets_its_own_partition(world, hosts):
    hosts.topology()
    hosts.topology(FabricType.ROCE_V2, prefix="r")
    backend = LibvirtBackend()
    ib, roce, later = (
        world.cluster("ib", instance_type=hosts.h100x4),
        world.cluster("roce", instance_type=hosts.h100x4, fabric_type=FabricType.ROCE_V2),
        world.cluster("later", instance_type=hosts.h100x4),
    )
    for cluster in (ib, roce):
        world.members(cluster, 2)
        backend.allocate(cluster, 2)
        backend.allocate(cluster, 2)  # keeps its partition
    first, second = (
        FabricPartition.objects.get(cluster=ib),
        FabricPartition.objects.get(cluster=roce),
    )
    assert (first.block, first.pkey, first.vlan) == (0, 0x100, None)
    assert (second.block, second.pkey, second.vlan) == (1, None, 101)
    backend.release(ib)
    world.members(later, 2)
    backend.allocate(later, 2)
    assert FabricPartition.objects.get(cluster=later).block == 0  # the freed block again
