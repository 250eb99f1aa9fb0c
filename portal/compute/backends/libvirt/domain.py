"""A VM's libvirt domain XML, built from its placement (one function, no libvirt calls).

Name and UUID from ``names`` (``vc-vm-<id>``, fixed per VM), the portal's metadata (VM,
cluster, project), the qcow2 overlay and the seed cdrom from the host's pool, NUMA pinning
from the placement, and the devices: GPUs as managed PCI hostdevs; an InfiniBand member's VF
as a plain hostdev; a RoCEv2 member's VF as ``<interface type='hostdev'>`` with the cluster's
VLAN. A host with emulated slots gets no hostdev: its fabric is the cluster's isolated
network, joined with a virtio NIC. Every guest has a management NIC on the host's management
network, under the filter that lets it reach the portal and nothing else (``management``).
"""

from xml.sax.saxutils import escape, quoteattr

from portal.compute.backends.libvirt import management
from portal.compute.backends.libvirt.guest import fabric_mac
from portal.compute.backends.libvirt.names import (
    disk_volume,
    domain_name,
    domain_uuid,
    network_name,
    seed_volume,
)

NAMESPACE = "https://vc-portal.invalid/libvirt/1"


def _pci(address):
    """``0000:18:00.0`` as libvirt's address attributes."""
    dom, bus, rest = address.split(":")
    slot, function = rest.split(".")
    return f"domain='0x{dom}' bus='0x{bus}' slot='0x{slot}' function='0x{function}'"


def build(vm, *, host, domain_type, placement, gpus, vf, partition, boot, memory_mib, vcpus):
    """``partition`` is the cluster's (None: not a member of a running cluster)."""
    nodes = (
        sorted({d.numa_node for d in gpus})
        if placement.numa_node is None
        else [placement.numa_node]
    )
    meta = (
        f"<vc:vm xmlns:vc='{NAMESPACE}'><vc:id>{vm.pk}</vc:id>"
        f"<vc:project>{vm.project_id}</vc:project>"
        f"<vc:cluster>{vm.cluster_id or ''}</vc:cluster>"
        f"<vc:name>{escape(vm.name)}</vc:name></vc:vm>"
    )
    os_xml = "<type arch='x86_64' machine='q35'>hvm</type>"
    if boot.kernel:
        os_xml += f"<kernel>{escape(boot.kernel)}</kernel>"
        if boot.initrd:
            os_xml += f"<initrd>{escape(boot.initrd)}</initrd>"
        os_xml += f"<cmdline>{escape(boot.cmdline)}</cmdline>"
    else:
        os_xml += "<boot dev='hd'/>"
    pinning = ""
    if gpus and not host.emulated:
        nodeset = ",".join(str(n) for n in nodes)
        pinning = f"<numatune><memory mode='strict' nodeset='{nodeset}'/></numatune>"
        cpuset = _cpuset(host, nodes)
        if cpuset:
            pins = "".join(f"<vcpupin vcpu='{i}' cpuset='{cpuset}'/>" for i in range(vcpus))
            pinning += f"<cputune>{pins}<emulatorpin cpuset='{cpuset}'/></cputune>"
    pool = quoteattr(host.storage_pool)
    devices = [
        "<disk type='volume' device='disk'><driver name='qemu' type='qcow2'/>"
        f"<source pool={pool} volume='{disk_volume(vm.pk)}'/>"
        "<target dev='vda' bus='virtio'/></disk>",
        "<disk type='volume' device='cdrom'><driver name='qemu' type='raw'/>"
        f"<source pool={pool} volume='{seed_volume(vm.pk)}'/>"
        "<target dev='sda' bus='sata'/><readonly/></disk>",
        management.interface_xml(),
        "<serial type='pty'/><console type='pty'/>",
        # The QEMU guest agent's channel (guest-exec, fs-freeze); shutdown still works by ACPI.
        "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>",
    ]
    if not host.emulated:
        devices += [
            "<hostdev mode='subsystem' type='pci' managed='yes'>"
            f"<source><address {_pci(d.address)}/></source></hostdev>"
            for d in gpus
        ]
    if partition is not None:
        devices.append(_fabric_device(vm, host, vf, partition))
    return (
        f"<domain type='{domain_type}'><name>{domain_name(vm.pk)}</name>"
        f"<uuid>{domain_uuid(vm.pk)}</uuid><metadata>{meta}</metadata>"
        f"<memory unit='MiB'>{memory_mib}</memory><vcpu placement='static'>{vcpus}</vcpu>"
        f"{pinning}<os>{os_xml}</os><features><acpi/></features>"
        "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot>"
        "<on_crash>destroy</on_crash>"
        f"<devices>{''.join(devices)}</devices></domain>"
    )


def _fabric_device(vm, host, vf, partition):
    if host.emulated or vf is None:
        return (
            f"<interface type='network'><mac address='{fabric_mac(vm)}'/>"
            f"<source network='{network_name(partition.cluster_id)}'/>"
            "<model type='virtio'/></interface>"
        )
    if partition.vlan is not None:  # RoCEv2: the VLAN is set on the VF
        return (
            f"<interface type='hostdev' managed='yes'><mac address='{fabric_mac(vm)}'/>"
            f"<source><address type='pci' {_pci(vf.address)}/></source>"
            f"<vlan><tag id='{partition.vlan}'/></vlan></interface>"
        )
    return (  # InfiniBand: the VF as a plain hostdev; its PKey lives in the subnet manager
        "<hostdev mode='subsystem' type='pci' managed='yes'>"
        f"<source><address {_pci(vf.address)}/></source></hostdev>"
    )


def _cpuset(host, nodes):
    """The host CPUs of ``nodes`` as read at 동기화 (empty if unknown: no CPU pinning)."""
    chosen = [c for n in nodes for c in (host.cpus_by_node or {}).get(str(n), [])]
    return ",".join(str(c) for c in chosen)
