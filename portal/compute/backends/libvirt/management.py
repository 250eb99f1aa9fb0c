"""The management network: how a guest reaches the portal, and nothing else on its host.

Every guest has one management NIC. On a host it is the portal's network ``<prefix>-mgmt``:
an isolated libvirt network (no ``<forward>``, so nothing is routed past the host) whose host
side is the address guests post to (``LIBVIRT_PORTAL_URL``'s, 10.0.2.2 by default), with
DHCP for the guests. The portal listens there for its guests' agents.

The NIC carries the network filter ``<prefix>-portal-only`` (libvirt's nwfilter, enforced by
the host's kernel on the guest's tap device, whatever the guest does): ARP, DHCP from the
network's own server, TCP to the portal's address and port, and SSH into the guest (TCP 22)
from that same address — the host's side of the network —, with the answers to those
connections. Everything else is dropped: the host's other ports (PostgreSQL, Redis,
libvirtd, SSH), other guests on the network (their SSH too), other addresses of the host,
IPv6 altogether.
A cluster's fabric is a network of its own (``fabric``), and the host has no address there.

Each guest's NIC has a MAC fixed by its VM (``mac``) and, once its domain is defined, a
DHCP reservation on the network (``reserve``: ``<host mac name ip/>``, added and removed with
``virNetwork.update``), so the address the guest gets is the one the portal stores as its
``private_ip`` and shows. Addresses come from the network's DHCP range: on the network the
portal makes, the upper half of its /24, ``RANGE_SIZE`` guests a host; a start beyond them is
refused (``ManagementAddressesExhausted``). A reservation whose domain is gone (a run that
crashed between the two, a domain removed by hand) is dropped at the next reservation on that
host.

A host whose operator defined ``<prefix>-mgmt`` already (for example a bridge onto the site's
management VLAN, ``<forward mode='bridge'>``) keeps it: the portal only creates the network
when it is missing, and the filter applies to the guest's NIC either way. The filter is
defined from ``filter_xml`` once per process and host, and again when its rules change;
the portal's address and port are parameters of each guest's NIC, set at its start.
"""

import ipaddress
import logging
import uuid
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import libvirt
from django.conf import settings

from portal.compute.backends.libvirt import names
from portal.compute.backends.libvirt.connection import lookup
from portal.foundation.errors import BackendError
from portal.foundation.errors.hosts import ManagementAddressesExhausted

log = logging.getLogger(__name__)
_filters: dict[str, str] = {}  # host URI -> the filter this process defined there
RANGE_SIZE = 127  # .128-.254 of the portal's /24 (``network_xml``)
_UPDATE = libvirt.VIR_NETWORK_UPDATE_AFFECT_LIVE | libvirt.VIR_NETWORK_UPDATE_AFFECT_CONFIG


def network_name() -> str:
    return f"{settings.LIBVIRT_NAME_PREFIX}-mgmt"


def filter_name() -> str:
    return f"{settings.LIBVIRT_NAME_PREFIX}-portal-only"


def _uuid(space: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{settings.LIBVIRT_PORTAL_ID}/{space}"))


def portal_endpoint() -> tuple[ipaddress.IPv4Address, int]:
    """The address and port a guest may reach, from ``LIBVIRT_PORTAL_URL``: an IPv4 address,
    never a name (a filter is written in addresses, and a name could change under it)."""
    parts = urlsplit(settings.LIBVIRT_PORTAL_URL)
    try:
        address = ipaddress.IPv4Address(parts.hostname or "")
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        log.error("LIBVIRT_PORTAL_URL must name the portal by an IPv4 address and port")
        raise BackendError() from None
    return address, port


def network_block() -> ipaddress.IPv4Interface:
    """The host's side of the management network: the portal's address in a /24."""
    address, _port = portal_endpoint()
    return ipaddress.IPv4Interface(f"{address}/24")


def network_xml() -> str:
    side = network_block()
    hosts = [h for h in side.network.hosts() if h != side.ip]
    first, last = hosts[len(hosts) // 2], hosts[-1]  # the upper half: leases
    return (
        f"<network><name>{network_name()}</name><uuid>{_uuid('mgmt')}</uuid>"
        f"<ip address='{side.ip}' netmask='{side.netmask}'>"
        f"<dhcp><range start='{first}' end='{last}'/></dhcp></ip></network>"
    )


def filter_xml() -> str:
    """Rules are read in priority order; the first that matches decides. The ``out``
    direction is the guest's traffic, ``in`` what reaches it; an accepted TCP connection
    also accepts its answers (libvirt's connection tracking), so the guest may answer SSH
    from the host's address but never open a connection to port 22 anywhere. The portal's
    address and port are the interface's parameters (``interface``), read from the settings
    at each start."""
    return (
        f"<filter name='{filter_name()}' chain='root'><uuid>{_uuid('portal-only')}</uuid>"
        "<rule action='accept' direction='inout' priority='-700'>"
        "<mac protocolid='arp'/></rule>"
        "<rule action='drop' direction='inout' priority='-600'>"
        "<mac protocolid='ipv6'/></rule>"
        "<rule action='accept' direction='out' priority='100'>"
        "<udp srcportstart='68' dstportstart='67'/></rule>"
        "<rule action='accept' direction='in' priority='100'>"
        "<udp srcportstart='67' dstportstart='68'/></rule>"
        "<rule action='accept' direction='out' priority='200'>"
        "<tcp dstipaddr='$PORTAL_IP' dstportstart='$PORTAL_PORT'/></rule>"
        "<rule action='accept' direction='in' priority='300'>"
        "<tcp srcipaddr='$PORTAL_IP' dstportstart='22'/></rule>"
        "<rule action='drop' direction='inout' priority='1000'><all/></rule>"
        "</filter>"
    )


def _ours_elsewhere(net) -> bool:
    """Our network (by UUID) on another address than the portal's now."""
    if net.UUIDString() != _uuid("mgmt"):
        return False
    ip = ET.fromstring(net.XMLDesc(0)).find("ip")  # noqa: S314 - libvirt's own XML
    return ip is None or ip.get("address") != str(network_block().ip)


def mac(vm_id: int) -> str:
    """The management NIC's MAC: fixed per VM (24 bits of its id), what its reservation
    names. Distinct from the fabric NIC's (``guest.boot.fabric_mac``)."""
    return f"52:54:0d:{(vm_id >> 16) & 0xFF:02x}:{(vm_id >> 8) & 0xFF:02x}:{vm_id & 0xFF:02x}"


def interface(vm) -> ET.Element:
    """The guest's management NIC, on the network, under the filter (an element of the
    domain's ``<devices>``)."""
    address, port = portal_endpoint()
    nic = ET.Element("interface", type="network")
    ET.SubElement(nic, "mac", address=mac(vm.pk))
    ET.SubElement(nic, "source", network=network_name())
    ET.SubElement(nic, "model", type="virtio")
    filterref = ET.SubElement(nic, "filterref", filter=filter_name())
    ET.SubElement(filterref, "parameter", name="PORTAL_IP", value=str(address))
    ET.SubElement(filterref, "parameter", name="PORTAL_PORT", value=str(port))
    return nic


def ensure(conn) -> None:
    """The network (created and started when missing) and the filter on ``conn``'s host.
    libvirt's test driver has networks but no filters: there, the filter is left out.

    A network of ours (our UUID) whose address is no longer the portal's (``LIBVIRT_PORTAL_URL``
    changed) is made again with the new one: guests attached to it lose their management NIC
    until their next start. One an operator defined (another UUID) is used as it is. A
    network that cannot start because another one of the host holds its address (another
    portal's, on a shared host) is a ``BackendError``, logged with what to do."""
    net = lookup(conn.networkLookupByName, network_name())
    if net is not None and _ours_elsewhere(net):
        if net.isActive():
            net.destroy()
        net.undefine()
        net = None
    if net is None:
        net = conn.networkDefineXML(network_xml())
    if not net.isActive():
        try:
            net.create()
        except libvirt.libvirtError as exc:
            log.error(
                "management network %s (%s) cannot start: %s; another network of this host "
                "holds the address? give each portal its own LIBVIRT_PORTAL_URL address",
                network_name(),
                network_block(),
                exc,
            )
            raise BackendError() from exc
    uri = conn.getURI()
    if uri.startswith("test:"):
        return
    rules = filter_xml()
    if _filters.get(uri) != rules or lookup(conn.nwfilterLookupByName, filter_name()) is None:
        conn.nwfilterDefineXML(rules)
        _filters[uri] = rules


def _dhcp(net) -> tuple[ET.Element, ET.Element] | None:
    """The network's IPv4 ``<ip>`` and its ``<dhcp>``, None when libvirt serves no DHCP there
    (an operator's bridge onto a site network with its own DHCP server)."""
    root = ET.fromstring(net.XMLDesc(0))  # noqa: S314 - libvirt's own XML
    for ip in root.findall("ip"):
        dhcp = ip.find("dhcp")
        if ip.get("family", "ipv4") == "ipv4" and dhcp is not None:
            return ip, dhcp
    return None


def _range(dhcp: ET.Element) -> list[ipaddress.IPv4Address]:
    found = []
    for span in dhcp.findall("range"):
        first = ipaddress.IPv4Address(span.get("start", ""))
        last = ipaddress.IPv4Address(span.get("end", ""))
        found += [ipaddress.IPv4Address(n) for n in range(int(first), int(last) + 1)]
    return found


def _host_xml(entry: ET.Element) -> str:
    return ET.tostring(entry, encoding="unicode")


def _prune(conn, net, dhcp: ET.Element, vm_id: int) -> None:
    """Drop our reservations (a domain's name) whose domain this host no longer has, and one
    under ``vm_id``'s name with another MAC (its name would refuse the new one)."""
    for entry in dhcp.findall("host"):
        name = entry.get("name") or ""
        pk = names.vm_id_of(name)
        if pk is None:
            continue  # not ours
        if pk != vm_id and lookup(conn.lookupByName, name) is not None:
            continue
        _delete_host(net, entry)
        dhcp.remove(entry)


def _delete_host(net, entry) -> None:
    """Remove a reservation from the running network and its definition; one already gone
    (removed meanwhile) is no error."""
    try:
        net.update(
            libvirt.VIR_NETWORK_UPDATE_COMMAND_DELETE,
            libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST,
            -1,
            _host_xml(entry),
            _UPDATE,
        )
    except libvirt.libvirtError:
        pass


def _leased(net) -> set[str]:
    try:
        return {lease["ipaddr"] for lease in net.DHCPLeases()}
    except libvirt.libvirtError:
        return set()  # a driver without leases (libvirt's test driver)


def reserve(conn, vm) -> str | None:
    """The VM's management address on ``conn``'s host: its reservation (kept, or added at
    the lowest free address of the range, neither reserved nor leased), called once its
    domain is defined. None on a network without libvirt's DHCP. Two portal processes
    adding at once: libvirt refuses the second entry with the same address, which then
    takes the next one."""
    net = conn.networkLookupByName(network_name())
    for _attempt in range(8):
        found = _dhcp(net)
        if found is None:
            return None
        _ip, dhcp = found
        for entry in dhcp.findall("host"):
            if (entry.get("mac") or "").lower() == mac(vm.pk):
                return entry.get("ip")
        _prune(conn, net, dhcp, vm.pk)
        taken = {entry.get("ip") for entry in dhcp.findall("host")} | _leased(net)
        free = [a for a in _range(dhcp) if str(a) not in taken]
        if not free:
            log.error("management network %s of %s: no address left", network_name(), conn.getURI())
            raise ManagementAddressesExhausted()
        entry = ET.Element("host", mac=mac(vm.pk), name=names.domain_name(vm.pk), ip=str(free[0]))
        try:
            add_reservation(net, _host_xml(entry))
        except libvirt.libvirtError as exc:
            log.info("reservation of %s refused (%s); trying again", free[0], exc)
            continue
        return str(free[0])
    raise BackendError()


def add_reservation(net, host_xml: str) -> None:
    """Add ``<host mac name ip/>`` to the running network and its definition (libvirt
    rewrites dnsmasq's hosts file and signals it: ~0.4 s under load here)."""
    net.update(
        libvirt.VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
        libvirt.VIR_NETWORK_SECTION_IP_DHCP_HOST,
        -1,
        host_xml,
        _UPDATE,
    )


def reservation(conn, vm_id: int) -> str | None:
    """The VM's reservation on ``conn``'s host as libvirt's ``<host/>`` XML, if it has one."""
    found = _reserved(conn, vm_id)
    return _host_xml(found[1]) if found is not None else None


def _reserved(conn, vm_id: int):
    """(the management network, the VM's ``<host/>`` entry there), or None."""
    net = lookup(conn.networkLookupByName, network_name())
    found = _dhcp(net) if net is not None else None
    for entry in found[1].findall("host") if found is not None else ():
        if (entry.get("mac") or "").lower() == mac(vm_id):
            return net, entry
    return None


def release(conn, vm_id: int) -> None:
    """The VM's reservation on ``conn``'s host, removed if there (with its domain)."""
    if (found := _reserved(conn, vm_id)) is not None:
        _delete_host(*found)
