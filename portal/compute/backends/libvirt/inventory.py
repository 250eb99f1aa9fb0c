"""동기화: a host's inventory read from its node devices (or its declared emulated slots).

GPUs are PCI devices of vendor 0x10de with a display/3D class; fabric VFs are Mellanox
(0x15b3) PCI functions with a ``phys_function`` (their PF). Each keeps its NUMA node. A
device gone from the host is deleted, or, while placed, marked missing (and deleted when its
placement ends). Host CPUs per NUMA node come from the capabilities' topology.
"""

import logging
import xml.etree.ElementTree as ET

from django.db import transaction
from django.utils import timezone

from portal.compute.backends.libvirt.connection import connect
from portal.compute.models.hosts import GpuHost, HostDevice, uri_refusal
from portal.foundation.errors import BackendError
from portal.foundation.errors.hosts import HostUriRefused

log = logging.getLogger(__name__)
NVIDIA, MELLANOX = "0x10de", "0x15b3"


def _address(cap):
    def num(tag):
        return int(cap.findtext(tag, "0"), 0)

    return f"{num('domain'):04x}:{num('bus'):02x}:{num('slot'):02x}.{num('function'):x}"


def read_devices(conn) -> list[dict]:
    found = []
    for dev in conn.listAllDevices(0):
        root = ET.fromstring(dev.XMLDesc(0))  # noqa: S314 - libvirtd's own XML
        cap = root.find("capability[@type='pci']")
        if cap is None:
            continue
        vendor = (
            (cap.find("vendor").get("id") or "").lower()  # type: ignore[union-attr]
            if cap.find("vendor") is not None
            else ""
        )
        numa = cap.find("numa")
        row = {
            "address": _address(cap),
            "vendor": vendor,
            "model": (cap.findtext("product") or "").strip(),
            "numa_node": max(int(numa.get("node", "0")), 0) if numa is not None else 0,
        }
        pf = cap.find("capability[@type='phys_function']/address")
        klass = int(cap.findtext("class", "0"), 0)
        if vendor == NVIDIA and klass >> 16 == 0x03:
            found.append({**row, "kind": HostDevice.Kind.GPU, "parent": ""})
        elif vendor == MELLANOX and pf is not None:
            parent = _address_attrs(pf)
            found.append({**row, "kind": HostDevice.Kind.VF, "parent": parent})
    return found


def _address_attrs(el):
    def num(name):
        return int(el.get(name, "0"), 0)

    return f"{num('domain'):04x}:{num('bus'):02x}:{num('slot'):02x}.{num('function'):x}"


def emulated_devices(host) -> list[dict]:
    """Declared slots, spread evenly over the declared NUMA nodes."""
    nodes = max(host.emulated_numa_nodes, 1)
    rows = []
    for kind, total, model in (
        (HostDevice.Kind.GPU, host.emulated_gpus, host.emulated_gpu_model),
        (HostDevice.Kind.VF, host.emulated_vfs, "emulated VF"),
    ):
        for i in range(total):
            rows.append(
                {
                    "kind": kind,
                    "address": f"emu-{kind.lower()}-{i}",
                    "vendor": "",
                    "model": model,
                    "numa_node": i * nodes // max(total, 1),
                    "parent": "",
                    "emulated": True,
                }
            )
    return rows


def read_cpus(conn) -> dict:
    root = ET.fromstring(conn.getCapabilities())  # noqa: S314 - libvirtd's own XML
    return {
        cell.get("id"): [int(c.get("id")) for c in cell.findall("cpus/cpu")]  # type: ignore[arg-type]
        for cell in root.findall("host/topology/cells/cell")
    }


def sync_host(host: GpuHost) -> int:
    """Read ``host``'s inventory into its rows; return how many devices it has. A host whose
    URI the rule refuses (``uri_refusal``) is not synced, emulated or not: the refusal, which
    says why, is raised and its code kept as the host's ``sync_error``."""
    try:
        refusal = uri_refusal(host.uri)
        if refusal is not None:
            log.error(
                "동기화 refused for host %s: libvirt URI %r (%s)",
                host.name,
                host.uri,
                refusal.params,
            )
            raise refusal
        if host.emulated:
            found, cpus = emulated_devices(host), {}
        else:
            conn = connect(host)
            found, cpus = read_devices(conn), read_cpus(conn)
    except BackendError as exc:
        error = exc.code if isinstance(exc, HostUriRefused) else "unreachable"
        GpuHost.objects.filter(pk=host.pk).update(sync_error=error)
        raise
    with transaction.atomic():
        host = GpuHost.objects.select_for_update().get(pk=host.pk)
        rows = {d.address: d for d in host.devices.all()}
        seen = set()
        for row in found:
            seen.add(row["address"])
            device = rows.get(row["address"])
            if device is None:
                HostDevice.objects.create(host=host, **row)
                continue
            for field, value in row.items():
                setattr(device, field, value)
            device.missing = False
            device.save()
        gone = [d for a, d in rows.items() if a not in seen]
        HostDevice.objects.filter(pk__in=[d.pk for d in gone], placement__isnull=True).delete()
        HostDevice.objects.filter(pk__in=[d.pk for d in gone]).update(missing=True)
        host.cpus_by_node, host.synced_at, host.sync_error = cpus, timezone.now(), ""
        host.save(update_fields=["cpus_by_node", "synced_at", "sync_error"])
    return len(found)


def sync_all() -> dict[str, str]:
    """Every host; one unreachable host does not stop the others."""
    results = {}
    for host in GpuHost.objects.order_by("pk"):
        try:
            results[host.name] = str(sync_host(host))
        except BackendError as exc:
            log.warning("동기화 failed for host %s (%r)", host.name, host.uri)
            results[host.name] = exc.code if isinstance(exc, HostUriRefused) else "unreachable"
    return results
