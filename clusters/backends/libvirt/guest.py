"""What a guest boots from and the NoCloud seed it reads at boot (cloud-init's format, so a
real cloud image reads it the same way).

The backend calls only these three: ``guest_boot`` (kernel/initrd/cmdline for a direct
kernel boot, or none to boot the disk, and the base volume its overlay is made on),
``seed_files`` (``meta-data``, ``user-data``, ``network-config``) and ``write_seed_iso``.
"""

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from portal.errors import BackendError


@dataclass(frozen=True)
class GuestBoot:
    kernel: str | None
    initrd: str | None
    cmdline: str
    base_volume: str | None  # a volume of the host's pool; None: an empty disk


def guest_boot(vm) -> GuestBoot:
    return GuestBoot(
        kernel=None,
        initrd=None,
        cmdline="",
        base_volume=getattr(settings, "LIBVIRT_BASE_VOLUME", "") or None,
    )


def seed_files(vm, *, fabric_address, portal_url, metrics_token) -> dict[str, bytes]:
    """The NoCloud seed: the VM's hostname, its agent's token and the portal URL; its fabric
    address (if a member of a running cluster) as a static address on the fabric NIC."""
    meta = f"instance-id: vc-vm-{vm.pk}\nlocal-hostname: {vm.name}\n"
    user = (
        "#cloud-config\n"
        "write_files:\n"
        "  - path: /etc/vc-agent.env\n"
        "    permissions: '0600'\n"
        "    content: |\n"
        f"      VC_PORTAL_URL={portal_url}\n"
        f"      VC_METRICS_TOKEN={metrics_token}\n"
        f"      VC_VM_ID={vm.pk}\n"
    )
    network = "version: 2\nethernets:\n  mgmt:\n    match: {name: 'e*'}\n    dhcp4: true\n"
    if fabric_address is not None and fabric_address.ip:
        network += (
            "  fabric:\n"
            f"    match: {{macaddress: '{fabric_mac(vm)}'}}\n"
            f"    addresses: ['{fabric_address.ip}/21']\n"
        )
    return {
        "meta-data": meta.encode(),
        "user-data": user.encode(),
        "network-config": network.encode(),
    }


def fabric_mac(vm) -> str:
    """The fabric NIC's MAC: fixed per VM, so the seed can match it."""
    return f"52:54:00:fa:{(vm.pk >> 8) & 0xFF:02x}:{vm.pk & 0xFF:02x}"


def write_seed_iso(files: dict[str, bytes], path) -> None:
    """An ISO 9660 volume labelled ``cidata`` holding ``files`` (NoCloud's seed)."""
    tool = shutil.which("genisoimage") or shutil.which("mkisofs") or shutil.which("xorrisofs")
    if tool is None:
        raise BackendError()
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            Path(tmp, name).write_bytes(data)
        subprocess.run(
            [tool, "-quiet", "-output", str(path), "-volid", "cidata", "-joliet", "-rock", tmp],
            check=True,
            capture_output=True,
        )
