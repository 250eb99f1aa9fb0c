"""A guest's management address is its DHCP reservation on the host's management network,
and the one the portal stores as its ``private_ip``: kept across starts, gone with the
domain, a crashed run's left-over taken back, a full range refused by name."""

import ipaddress
import xml.etree.ElementTree as ET

import libvirt
import pytest
from django.utils import translation

from portal.compute.backends.libvirt import LibvirtBackend, management, names
from portal.compute.models.hosts import Placement
from portal.foundation.errors.hosts import ManagementAddressesExhausted
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db


def reservations(hosts, host) -> dict[str, tuple[str, str]]:
    """{MAC: (name, address)} of the host's management network."""
    net = hosts.conn(host).networkLookupByName(management.network_name())
    dhcp = ET.fromstring(net.XMLDesc(0)).find("ip/dhcp")
    return {h.get("mac"): (h.get("name"), h.get("ip")) for h in dhcp.findall("host")}


def started(world, hosts, name):
    vm = world.vm(name, instance_type=hosts.h100x4)
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.status == VmStatus.RUNNING, vm.last_error
    return vm, Placement.objects.select_related("domain_host").get(vm=vm).domain_host


def test_the_stored_address_is_the_guests_reservation_and_stays_with_it(world, hosts):
    hosts.add("h0")
    created = world.vm("unplaced")
    assert LibvirtBackend().create_vm(created) is None  # nothing true to say before a host
    vm, host = started(world, hosts, "a")
    mac = management.mac(vm.pk)
    dom = hosts.conn(host).lookupByName(names.domain_name(vm.pk))
    nic = ET.fromstring(dom.XMLDesc(0)).find(
        f"devices/interface/source[@network='{management.network_name()}']/.."
    )
    assert nic.find("mac").get("address") == mac
    assert reservations(hosts, host) == {mac: (names.domain_name(vm.pk), vm.private_ip)}
    side = management.network_block()
    assert ipaddress.IPv4Address(vm.private_ip) in side.network
    assert int(ipaddress.IPv4Address(vm.private_ip)) > int(side.ip) + 125  # the leases' half
    first = vm.private_ip
    vm_services.stop_vm(vm.pk, actor=world.admin)
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.private_ip == first and len(reservations(hosts, host)) == 1
    other, _ = started(world, hosts, "b")
    assert other.private_ip != first and len(reservations(hosts, host)) == 2
    vm_services.stop_vm(vm.pk, actor=world.admin)
    vm_services.delete_vm(vm.pk, actor=world.admin)
    assert list(reservations(hosts, host)) == [management.mac(other.pk)]
    management.release(hosts.conn(host), vm.pk)  # again: nothing to do


def test_a_crashed_runs_reservation_is_taken_back(world, hosts):
    host = hosts.add("h0")
    conn = hosts.conn(host)
    management.ensure(conn)
    net = conn.networkLookupByName(management.network_name())
    lowest = str(management._range(ET.fromstring(net.XMLDesc(0)).find("ip/dhcp"))[0])
    left = f"<host mac='52:54:0d:ff:ff:ff' name='{names.domain_name(99999)}' ip='{lowest}'/>"
    foreign = "<host mac='52:54:00:12:34:56' name='printer' ip='10.0.3.129'/>"
    vm = world.vm("a", instance_type=hosts.h100x4)
    old_mac = f"<host mac='02:00:00:00:00:01' name='{names.domain_name(vm.pk)}' ip='10.0.3.130'/>"
    for entry in (left, foreign, old_mac):
        net.update(
            libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
            libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST,
            -1,
            entry,
            management._UPDATE,
        )
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.private_ip == lowest  # its domain is gone: the address is free again
    assert {name for name, _ in reservations(hosts, host).values()} == {
        names.domain_name(vm.pk),
        "printer",  # not ours: kept
    }


def test_a_full_range_refuses_the_start_by_name(world, hosts):
    host = hosts.add("h0")
    conn = hosts.conn(host)
    management.ensure(conn)
    net = conn.networkLookupByName(management.network_name())
    span = management._range(ET.fromstring(net.XMLDesc(0)).find("ip/dhcp"))
    assert len(span) == management.RANGE_SIZE
    for n, address in enumerate(span):
        net.update(
            libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
            libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST,
            -1,
            f"<host mac='02:00:00:00:{n >> 8:02x}:{n & 0xFF:02x}' name='x{n}' ip='{address}'/>",
            management._UPDATE,
        )
    vm = world.vm("late")
    with pytest.raises(ManagementAddressesExhausted) as caught:
        LibvirtBackend().start_vm(vm)
    with translation.override("ko"):
        assert "관리 네트워크에 남은 주소가 없어" in caught.value.message
    assert VirtualMachine.objects.get(pk=vm.pk).private_ip is None
    assert not Placement.objects.filter(vm=vm, held=True).exists()  # it holds nothing


def test_a_members_address_is_its_reservation_too(world, hosts):
    from tests.clusters.test_libvirt_backend import running_cluster

    hosts.add("h0")
    _cluster, members = running_cluster(world, hosts, 2)
    for vm in members:
        vm_services.start_vm(vm.pk, actor=world.admin)
    host = Placement.objects.select_related("domain_host").get(vm=members[0]).domain_host
    shown = {management.mac(vm.pk): vm.private_ip for vm in VirtualMachine.objects.all()}
    assert {mac: ip for mac, (_n, ip) in reservations(hosts, host).items()} == shown
