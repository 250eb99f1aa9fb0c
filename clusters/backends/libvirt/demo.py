"""``manage.py rundemo --backend libvirt``: the same demo on real guests of this machine.

``configure`` points the portal (this process, and the worker and beat it starts) at the
libvirt backend with TCG domains and tells guests where the portal is (QEMU user networking:
the host's loopback is 10.0.2.2 from inside a guest). ``prepare`` builds the guest image
(cached), registers this machine as GPU hosts with declared GPU slots matching the demo's
capacity — 4 H100 nodes per fabric in kr-central-1a, 1 L40S RoCE node there (a start of 2
shows the capacity error), 1 H100 node in kr-central-1b — and puts the image's base volume in
the hosts' storage pool."""

import os

from django.conf import settings

from clusters.backends.libvirt import guest_image, guest_install
from clusters.backends.libvirt.inventory import sync_host
from clusters.hosts.models import GpuHost
from vms.models import FabricType, InstanceType, Zone

URI = "qemu:///system"
GUEST_HOST = "10.0.2.2"
BACKEND = "clusters.backends.libvirt.LibvirtBackend"
# name: (zone, fabric, instance type whose GPU model the slots are, GPUs, VFs)
HOSTS = {
    "local-ib": ("kr-central-1a", FabricType.INFINIBAND, "gpu.h100x8", 32, 4),
    "local-roce": ("kr-central-1a", FabricType.ROCE_V2, "gpu.h100x8", 32, 4),
    "local-l40s": ("kr-central-1a", FabricType.ROCE_V2, "gpu.l40sx4", 4, 1),
    "local-b": ("kr-central-1b", FabricType.INFINIBAND, "gpu.h100x8", 8, 1),
}


def configure(addrport: str) -> dict[str, str]:
    """Settings of this process and the environment of its children."""
    port = addrport.rsplit(":", 1)[-1]
    env = {
        "COMPUTE_BACKEND": BACKEND,
        "LIBVIRT_DOMAIN_TYPE": os.environ.get("LIBVIRT_DOMAIN_TYPE", "qemu"),
        "LIBVIRT_PORTAL_URL": os.environ.get("LIBVIRT_PORTAL_URL",
                                             f"http://{GUEST_HOST}:{port}"),
    }
    hosts = [*settings.ALLOWED_HOSTS, GUEST_HOST]
    env["ALLOWED_HOSTS"] = ",".join(dict.fromkeys(hosts))
    os.environ.update(env)
    settings.COMPUTE_BACKEND = BACKEND
    settings.LIBVIRT_DOMAIN_TYPE = env["LIBVIRT_DOMAIN_TYPE"]
    settings.LIBVIRT_PORTAL_URL = env["LIBVIRT_PORTAL_URL"]
    settings.ALLOWED_HOSTS = list(dict.fromkeys(hosts))
    return env


def prepare(out) -> list[GpuHost]:
    """The image (built once), the hosts (idempotent) and the base volume in their pool."""
    image, built = guest_image.build(out=out)
    out.write(f"guest image {'built' if built else 'up to date'}: {image.directory.name}\n")
    hosts = []
    for name, (zone, fabric, itype, gpus, vfs) in HOSTS.items():
        host, _created = GpuHost.objects.update_or_create(name=name, defaults={
            "zone": Zone.objects.get(code=zone), "uri": URI, "domain_type": "qemu",
            "fabric": fabric, "block": "b1", "leaf": "l1", "rack": "r1",
            "emulated_gpus": gpus, "emulated_vfs": vfs,
            "emulated_gpu_model": InstanceType.objects.get(code=itype).gpu_model,
        })
        sync_host(host)
        hosts.append(host)
    volume = guest_install.install(hosts[0], image)  # one pool: the hosts share this libvirtd
    out.write(f"GPU hosts {', '.join(HOSTS)} on {URI}, base volume {volume}\n")
    return hosts
