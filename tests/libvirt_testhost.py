"""Host definitions for libvirt's test driver (``test:///<file>``, libvirt.org/drvtest.html):
a GPU host with ``gpus`` H100s and ``vfs`` ConnectX VFs spread over ``numa_nodes`` nodes,
and the storage pool the backend uses. The fast tests and the placement benchmark run the
backend against these; each file is one host (the test driver keeps state per URI)."""

from pathlib import Path


def _pci(bus, function, vendor, product, klass, numa, name, extra=""):
    return (
        f"<device><name>pci_0000_{bus:02x}_00_{function}</name><parent>computer</parent>"
        f"<capability type='pci'><class>{klass}</class><domain>0</domain><bus>{bus}</bus>"
        f"<slot>0</slot><function>{function}</function>"
        f"<product id='{product}'>{name}</product><vendor id='{vendor}'>v</vendor>"
        f"{extra}<numa node='{numa}'/></capability></device>"
    )


def host_xml(gpus=8, vfs=8, numa_nodes=2, pool="vc-pool", base_volume="base.qcow2") -> str:
    devices = []
    for i in range(gpus):
        numa = i * numa_nodes // gpus
        devices.append(
            _pci(0x18 + i, 0, "0x10de", "0x2330", "0x030200", numa, "GH100 [H100 SXM5 80GB]")
        )
    for i in range(vfs):
        numa = i * numa_nodes // vfs
        pf = f"<capability type='phys_function'><address domain='0x0000' bus='0x{0x60 + numa:02x}'"
        pf += " slot='0x00' function='0x0'/></capability>"
        devices.append(_pci(0x70 + i, 1, "0x15b3", "0x101e", "0x020700", numa, "ConnectX-7 VF", pf))
    return (
        "<node><cpu><nodes>%d</nodes><sockets>1</sockets><cores>2</cores><threads>1</threads>"
        "<active>%d</active><mhz>2000</mhz><model>x86_64</model></cpu>"
        "<memory>268435456</memory>%s"
        f"<pool type='dir'><name>{pool}</name><capacity unit='GiB'>1000</capacity>"
        "<allocation>0</allocation><available unit='GiB'>1000</available>"
        "<target><path>/var/lib/vc</path></target>"
        f"<volume type='file'><name>{base_volume}</name><capacity unit='GiB'>1</capacity>"
        f"<target><path>/var/lib/vc/{base_volume}</path><format type='qcow2'/></target>"
        "</volume></pool></node>"
    ) % (numa_nodes, 2 * numa_nodes, "".join(devices))


def write_hosts(directory, count, **kwargs) -> list[str]:
    """``count`` host files under ``directory``; returns their test driver URIs."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    uris = []
    for i in range(count):
        path = directory / f"host-{i}.xml"
        path.write_text(host_xml(**kwargs))
        uris.append(f"test://{path.resolve()}")
    return uris
