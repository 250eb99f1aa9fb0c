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


class _Kind:
    """Names ``<prefix>-<tag>-<id>`` and UUIDs ``uuid5(<portal id>/<space>/<id>)``."""

    def __init__(self, tag: str, space: str):
        self.tag, self.space = tag, space

    def name(self, pk) -> str:
        return f"{settings.LIBVIRT_NAME_PREFIX}-{self.tag}-{pk}"

    def id_of(self, name: str) -> int | None:
        pattern = re.escape(f"{settings.LIBVIRT_NAME_PREFIX}-{self.tag}-") + r"(\d+)"
        match = re.fullmatch(pattern, name)
        return int(match.group(1)) if match else None

    def uuid(self, pk) -> str:
        return str(
            uuid.uuid5(uuid.NAMESPACE_URL, f"{settings.LIBVIRT_PORTAL_ID}/{self.space}/{pk}")
        )

    def owned(self, obj) -> int | None:
        """The id of a libvirt object (domain, network) of ours; None for anyone else's."""
        pk = self.id_of(obj.name())
        return pk if pk is not None and obj.UUIDString() == self.uuid(pk) else None


_VM, _FABRIC = _Kind("vm", "vm"), _Kind("fab", "fabric")
domain_name, vm_id_of, domain_uuid, owned_domain = _VM.name, _VM.id_of, _VM.uuid, _VM.owned
network_name, cluster_id_of = _FABRIC.name, _FABRIC.id_of
network_uuid, owned_network = _FABRIC.uuid, _FABRIC.owned


def disk_volume(vm_id) -> str:
    return f"{domain_name(vm_id)}.qcow2"


def seed_volume(vm_id) -> str:
    return f"{domain_name(vm_id)}-seed.iso"
