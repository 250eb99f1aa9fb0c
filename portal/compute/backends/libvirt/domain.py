"""A VM's libvirt domain XML, built from its placement (no libvirt calls).

Name and UUID from ``names`` (``vc-vm-<id>``, fixed per VM), the portal's metadata (VM,
cluster, project), the qcow2 overlay and the seed cdrom from the host's pool, NUMA pinning
from the placement, and the devices: GPUs as managed PCI hostdevs; an InfiniBand member's VF
as a plain hostdev; a RoCEv2 member's VF as ``<interface type='hostdev'>`` with the cluster's
VLAN. A host with emulated slots gets no hostdev: its fabric is the cluster's isolated
network, joined with a virtio NIC. Every guest has a management NIC on the host's management
network, under the filter that lets it reach the portal and nothing else (``management``).

Every element is built with ElementTree, one function a device kind, and serialized once:
each value (a VM's name, a pool's, a kernel's path) is escaped by the serializer, never by
hand, so whatever a value holds the document is well formed and reads back as it was.
"""

import xml.etree.ElementTree as ET

from portal.compute.backends.libvirt import management
from portal.compute.backends.libvirt.guest.boot import fabric_mac
from portal.compute.backends.libvirt.names import (
    disk_volume,
    domain_name,
    domain_uuid,
    network_name,
    seed_volume,
)

NAMESPACE = "https://vc-portal.invalid/libvirt/1"
ET.register_namespace("vc", NAMESPACE)  # the metadata's prefix as libvirt keeps it


def _el(tag: str, text: object = None, **attrs: object) -> ET.Element:
    """``<tag attrs…>text</tag>``; every value as a string."""
    element = ET.Element(tag, {name: str(value) for name, value in attrs.items()})
    if text is not None:
        element.text = str(text)
    return element


def _with(parent: ET.Element, *children: ET.Element) -> ET.Element:
    parent.extend(children)
    return parent


def _pci(address: str) -> dict[str, str]:
    """``0000:18:00.0`` as libvirt's address attributes."""
    dom, bus, rest = address.split(":")
    slot, function = rest.split(".")
    return {
        "domain": f"0x{dom}",
        "bus": f"0x{bus}",
        "slot": f"0x{slot}",
        "function": f"0x{function}",
    }


def build(vm, *, host, domain_type, placement, gpus, vf, partition, boot, memory_mib, vcpus):
    """``partition`` is the cluster's (None: not a member of a running cluster)."""
    root = _with(
        _el("domain", type=domain_type),
        _el("name", domain_name(vm.pk)),
        _el("uuid", domain_uuid(vm.pk)),
        _with(_el("metadata"), metadata(vm)),
        _el("memory", memory_mib, unit="MiB"),
        _el("vcpu", vcpus, placement="static"),
    )
    if gpus and not host.emulated:
        nodes = (
            sorted({d.numa_node for d in gpus})
            if placement.numa_node is None
            else [placement.numa_node]
        )
        root.extend(numa_pinning(host, nodes, vcpus))
    root.extend(
        [
            os_boot(boot),
            _with(_el("features"), _el("acpi")),
            _el("on_poweroff", "destroy"),
            _el("on_reboot", "restart"),
            _el("on_crash", "destroy"),
        ]
    )
    devices = _with(
        _el("devices"),
        disk(host.storage_pool, vm.pk),
        seed_cdrom(host.storage_pool, vm.pk),
        management.interface(vm),
        _el("serial", type="pty"),
        _el("console", type="pty"),
        # The QEMU guest agent's channel (guest-exec, fs-freeze); shutdown still works by ACPI.
        _with(
            _el("channel", type="unix"), _el("target", type="virtio", name="org.qemu.guest_agent.0")
        ),
    )
    if not host.emulated:
        devices.extend(pci_hostdev(d.address) for d in gpus)
    if partition is not None:
        devices.append(fabric_device(vm, host, vf, partition))
    root.append(devices)
    return ET.tostring(root, encoding="unicode")


def metadata(vm) -> ET.Element:
    """The portal's own record in the domain, in its namespace: the VM, its project and its
    cluster (empty: none), and the VM's name as it was at the definition."""

    def vc(tag: str, text: object = None) -> ET.Element:
        return _el(f"{{{NAMESPACE}}}{tag}", text)

    return _with(
        vc("vm"),
        vc("id", vm.pk),
        vc("project", vm.project_id),
        vc("cluster", vm.cluster_id or ""),
        vc("name", vm.name),
    )


def os_boot(boot) -> ET.Element:
    """Direct kernel boot when the guest image gives a kernel, else from the disk."""
    element = _with(_el("os"), _el("type", "hvm", arch="x86_64", machine="q35"))
    if not boot.kernel:
        return _with(element, _el("boot", dev="hd"))
    element.append(_el("kernel", boot.kernel))
    if boot.initrd:
        element.append(_el("initrd", boot.initrd))
    return _with(element, _el("cmdline", boot.cmdline))


def numa_pinning(host, nodes, vcpus) -> list[ET.Element]:
    """Memory strictly on ``nodes``; every vCPU and the emulator on their host CPUs (none
    pinned when the host's CPUs per node are unknown)."""
    nodeset = ",".join(str(n) for n in nodes)
    pinning = [_with(_el("numatune"), _el("memory", mode="strict", nodeset=nodeset))]
    cpuset = _cpuset(host, nodes)
    if cpuset:
        tune = _el("cputune")
        tune.extend(_el("vcpupin", vcpu=i, cpuset=cpuset) for i in range(vcpus))
        pinning.append(_with(tune, _el("emulatorpin", cpuset=cpuset)))
    return pinning


def disk(pool: str, vm_id: int) -> ET.Element:
    """The VM's qcow2 overlay in the host's pool, its first virtio disk."""
    return _with(
        _el("disk", type="volume", device="disk"),
        _el("driver", name="qemu", type="qcow2"),
        _el("source", pool=pool, volume=disk_volume(vm_id)),
        _el("target", dev="vda", bus="virtio"),
    )


def seed_cdrom(pool: str, vm_id: int) -> ET.Element:
    """The NoCloud seed, a read-only SATA cdrom."""
    return _with(
        _el("disk", type="volume", device="cdrom"),
        _el("driver", name="qemu", type="raw"),
        _el("source", pool=pool, volume=seed_volume(vm_id)),
        _el("target", dev="sda", bus="sata"),
        _el("readonly"),
    )


def pci_hostdev(address: str) -> ET.Element:
    """A PCI device passed through whole (a GPU, an InfiniBand VF), managed by libvirt."""
    return _with(
        _el("hostdev", mode="subsystem", type="pci", managed="yes"),
        _with(_el("source"), _el("address", **_pci(address))),
    )


def fabric_device(vm, host, vf, partition) -> ET.Element:
    """The member's fabric: the cluster's network on emulated slots, the VF with the
    cluster's VLAN on RoCEv2, the VF as a plain hostdev on InfiniBand."""
    if host.emulated or vf is None:
        return _with(
            _el("interface", type="network"),
            _el("mac", address=fabric_mac(vm)),
            _el("source", network=network_name(partition.cluster_id)),
            _el("model", type="virtio"),
        )
    if partition.vlan is not None:  # RoCEv2: the VLAN is set on the VF
        return _with(
            _el("interface", type="hostdev", managed="yes"),
            _el("mac", address=fabric_mac(vm)),
            _with(_el("source"), _el("address", type="pci", **_pci(vf.address))),
            _with(_el("vlan"), _el("tag", id=partition.vlan)),
        )
    return pci_hostdev(vf.address)  # InfiniBand: its PKey lives in the subnet manager


def _cpuset(host, nodes):
    """The host CPUs of ``nodes`` as read at 동기화 (empty if unknown: no CPU pinning)."""
    chosen = [c for n in nodes for c in (host.cpus_by_node or {}).get(str(n), [])]
    return ",".join(str(c) for c in chosen)
