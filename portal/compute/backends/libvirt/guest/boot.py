"""What the libvirt backend hands a guest: how it boots (the built image's kernel, initramfs
and base volume) and its NoCloud seed — cloud-init's format, so a cloud image with cloud-init
reads it the same way as the small image's own ``vc-nocloud`` does:

- ``meta-data``: ``instance-id`` (stable per VM), ``local-hostname`` (the VM's name made a
  valid hostname) and ``public-keys``, the SSH keys the VM carries and its cluster holds
  (``public_keys``): cloud-init gives them to its default user, the small image's
  ``vc-nocloud`` to the login user ``vc``;
- ``network-config`` (version 2): the fabric NIC (matched by its MAC, ``fabric_mac``) with its
  static address in the cluster's block, every other ethernet NIC by DHCP (the management
  NIC: QEMU user networking, where the host's portal is 10.0.2.2);
- ``user-data`` (``#cloud-config``; JSON is YAML): writes ``/etc/vc-metrics.env`` (portal URL
  and this VM's own metrics token, root-only) and a systemd unit, then installs the agent with
  pip where it is missing and starts it under systemd where there is one (the small image's
  init runs it from that file itself).

The seed is an ISO 9660 volume labelled ``cidata`` (``write_seed_iso``, pycdlib: pure Python)."""

import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from metrics.vm_agent import VERSION as AGENT_VERSION
from portal.compute.backends.base import guest_hostname as hostname
from portal.compute.backends.libvirt import fabric, names
from portal.compute.backends.libvirt.guest import image as guest_image
from portal.compute.backends.libvirt.guest import install as guest_install
from portal.compute.models.hosts import Placement
from portal.foundation.errors import GuestImageMissing
from portal.models import SshKey

INGEST_PATH = "/api/metrics/ingest"
ENV_FILE = "/etc/vc-metrics.env"
UNIT = """[Unit]
Description=Virtual Cluster metrics agent
After=network-online.target
Wants=network-online.target

[Service]
EnvironmentFile=/etc/vc-metrics.env
ExecStart=/usr/bin/env vc-metrics-agent
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
"""
# Where a cloud image without the agent gets it (the small image has it installed already,
# from the wheel of the same checkout): the portal's own version, unless GUEST_AGENT_PIP_SPEC
# names another.
AGENT_PIP_SPEC = f"vc-metrics-agent=={AGENT_VERSION}"
INSTALL = (
    "command -v vc-metrics-agent >/dev/null 2>&1 || "
    "python3 -m pip install --quiet --break-system-packages {spec} || "
    "python3 -m pip install --quiet {spec}"
)
START = (
    "if [ -d /run/systemd/system ]; then systemctl daemon-reload && "
    "systemctl enable --now vc-metrics-agent.service; fi"
)


@dataclass(frozen=True)
class GuestBoot:
    kernel: str | None  # None: boot the disk
    initrd: str | None
    cmdline: str
    base_volume: str | None  # a volume of the host's pool; None: an empty disk


def guest_boot(vm, pool) -> GuestBoot:
    """Direct kernel boot of the built image (``manage.py build_guest_image``): its kernel,
    initramfs and base volume as ``guest_install`` puts them in the host's ``pool`` (the
    kernel and initramfs put there now if they are missing). ``LIBVIRT_BASE_VOLUME`` instead
    boots that volume's own kernel (a cloud image with cloud-init)."""
    if getattr(settings, "LIBVIRT_BASE_VOLUME", ""):
        return GuestBoot(None, None, "", settings.LIBVIRT_BASE_VOLUME)
    if _on_test_driver(vm):
        return GuestBoot(None, None, "", None)  # libvirt's test driver boots nothing
    image = guest_image.current()
    if image is None:
        raise GuestImageMissing()
    guest_install.ensure_boot_files(pool, image)
    kernel, initrd = guest_install.boot_paths(pool, image) or (None, None)
    return GuestBoot(kernel, initrd, image.cmdline, image.base_volume_name)


def _on_test_driver(vm) -> bool:
    uri = Placement.objects.filter(vm_id=vm.pk).values_list("host__uri", flat=True).first()
    return bool(uri and uri.startswith("test:"))


def fabric_mac(vm) -> str:
    """The fabric NIC's MAC: fixed per VM, so the seed can match it."""
    return f"52:54:00:fa:{(vm.pk >> 8) & 0xFF:02x}:{vm.pk & 0xFF:02x}"


def ingest_url(portal_url: str) -> str:
    base = portal_url.rstrip("/")
    return base if base.endswith(INGEST_PATH) else base + INGEST_PATH


def public_keys(vm) -> list[str]:
    """The SSH public keys ``vm``'s seed carries: the keys it was created with, then those its
    cluster holds now (a member's), each once, every one still registered (one ``type base64
    [comment]`` line each, as the portal checked and kept them). Read at every start: a
    cluster's change reaches a member at its next start, and a detached VM keeps its own."""
    own = list(vm.ssh_keys.order_by("pk").values_list("public_key", flat=True))
    if vm.cluster_id is None:
        return own
    shared = SshKey.objects.filter(clusters=vm.cluster_id).order_by("pk")
    return list(dict.fromkeys([*own, *shared.values_list("public_key", flat=True)]))


def seed_files(
    vm, *, fabric_address, portal_url, metrics_token, ssh_keys: Sequence[str] = ()
) -> dict[str, bytes]:
    """The NoCloud seed of ``vm``: meta-data, user-data and network-config.
    ``fabric_address`` (a ``FabricAddress``) gives the fabric NIC's IP, in the cluster's
    block; None or no IP: no fabric NIC is configured. The fabric entry, matched by MAC, is
    the more specific one: the management entry's ``e*`` leaves that NIC to it. ``ssh_keys``
    (``public_keys``) go in meta-data's ``public-keys``; without any, there is no such entry."""
    meta: dict[str, object] = {
        "instance-id": names.domain_name(vm.pk),
        "local-hostname": hostname(vm),
    }
    if ssh_keys:
        meta["public-keys"] = list(ssh_keys)
    ethernets = {"mgmt": {"match": {"name": "e*"}, "dhcp4": True}}
    if fabric_address is not None and getattr(fabric_address, "ip", None):
        ethernets["fabric"] = {
            "match": {"macaddress": fabric_mac(vm)},
            "dhcp4": False,
            "addresses": [f"{fabric_address.ip}/{fabric.BLOCK_PREFIX}"],
        }
    network = {"version": 2, "ethernets": ethernets}
    interval = settings.GUEST_AGENT_INTERVAL
    environment = (
        f"METRICS_AGENT_URL={ingest_url(portal_url)}\n"
        f"METRICS_AGENT_TOKEN={metrics_token}\n"
        f"METRICS_AGENT_INTERVAL={interval}\n"
    )
    spec = settings.GUEST_AGENT_PIP_SPEC or AGENT_PIP_SPEC
    user = {
        "hostname": hostname(vm),
        "write_files": [
            {"path": ENV_FILE, "permissions": "0600", "content": environment},
            {
                "path": "/etc/systemd/system/vc-metrics-agent.service",
                "permissions": "0644",
                "content": UNIT,
            },
        ],
        "runcmd": [["sh", "-c", INSTALL.format(spec=spec)], ["sh", "-c", START]],
    }
    return {
        "meta-data": _yaml(meta),
        "user-data": b"#cloud-config\n" + _yaml(user),
        "network-config": _yaml(network),
    }


def _yaml(document) -> bytes:
    """JSON is YAML: what cloud-init and vc-nocloud parse, with no YAML writer needed."""
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()


def write_seed_iso(files: dict[str, bytes], path) -> None:
    """An ISO 9660 image labelled ``cidata`` with ``files`` at its root (Rock Ridge and
    Joliet names, as ``genisoimage -V cidata -J -r`` makes it)."""
    import pycdlib

    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident="cidata")
    for number, (name, data) in enumerate(sorted(files.items())):
        short = re.sub(r"[^A-Z0-9]", "", name.upper())[:8] or f"FILE{number}"
        iso.add_fp(
            io.BytesIO(data),
            len(data),
            f"/{short}{number}.;1",
            rr_name=name,
            joliet_path=f"/{name}",
        )
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    iso.write(str(partial))
    iso.close()
    partial.chmod(0o644)
    partial.replace(target)
