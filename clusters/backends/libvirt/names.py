"""What this portal calls its objects on a host, and how it knows them for its own.

Names carry ``LIBVIRT_NAME_PREFIX`` (``vc``: ``vc-vm-7``, ``vc-vm-7.qcow2``,
``vc-vm-7-seed.iso``, ``vc-fab-3``): two portals sharing hosts — or the test suite beside a
demo on one machine — must each have their own, or they would reuse each other's disks.
Domains and networks also carry a UUID derived from ``LIBVIRT_PORTAL_ID`` and the id: an
object with one of our names but another UUID belongs to someone else and is never
stopped, joined, redefined or removed. Base volumes (``vc-base-<image key>``) are named by
their content and shared.
"""

import re
import uuid

from django.conf import settings


def _prefix(kind: str) -> str:
    return f"{settings.LIBVIRT_NAME_PREFIX}-{kind}-"


def _id_of(kind: str, name: str) -> int | None:
    match = re.fullmatch(re.escape(_prefix(kind)) + r"(\d+)", name)
    return int(match.group(1)) if match else None


def _uuid(kind: str, pk) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{settings.LIBVIRT_PORTAL_ID}/{kind}/{pk}"))


def domain_name(vm_id) -> str:
    return f"{_prefix('vm')}{vm_id}"


def vm_id_of(name: str) -> int | None:
    return _id_of("vm", name)


def domain_uuid(vm_id) -> str:
    """Stable for the VM's life: a redefined domain keeps its UUID."""
    return _uuid("vm", vm_id)


def disk_volume(vm_id) -> str:
    return f"{domain_name(vm_id)}.qcow2"


def seed_volume(vm_id) -> str:
    return f"{domain_name(vm_id)}-seed.iso"


def network_name(cluster_id) -> str:
    return f"{_prefix('fab')}{cluster_id}"


def cluster_id_of(name: str) -> int | None:
    return _id_of("fab", name)


def network_uuid(cluster_id) -> str:
    return _uuid("fabric", cluster_id)


def owned_domain(dom) -> int | None:
    """The VM id of a domain of ours, None for anyone else's."""
    vm_id = vm_id_of(dom.name())
    return vm_id if vm_id is not None and dom.UUIDString() == domain_uuid(vm_id) else None


def owned_network(net) -> int | None:
    """The cluster id of a fabric network of ours, None for anyone else's."""
    cluster_id = cluster_id_of(net.name())
    if cluster_id is None or net.UUIDString() != network_uuid(cluster_id):
        return None
    return cluster_id
