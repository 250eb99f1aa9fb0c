"""A VM's volumes in its host's storage pool: the qcow2 overlay on the base image, the
NoCloud seed, and their removal with the domain (nothing is left behind)."""

import tempfile
from pathlib import Path

from django.conf import settings

from portal.compute import hooks
from portal.compute.backends.libvirt import management
from portal.compute.backends.libvirt.connection import connect, lookup
from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.backends.libvirt.names import disk_volume, domain_uuid, seed_volume


def ensure_disk(pool, vm, boot):
    name = disk_volume(vm.pk)
    if lookup(pool.storageVolLookupByName, name) is not None:
        return
    backing = ""
    if boot.base_volume:
        base = pool.storageVolLookupByName(boot.base_volume)
        backing = f"<backingStore><path>{base.path()}</path><format type='qcow2'/></backingStore>"
    pool.createXML(
        f"<volume><name>{name}</name>"
        f"<capacity unit='GiB'>{settings.LIBVIRT_DISK_GIB}</capacity>"
        f"<target><format type='qcow2'/></target>{backing}</volume>",
        0,
    )


def write_seed(host, pool, vm, address):
    """The NoCloud seed, rewritten at each start (the fabric address may have changed)
    with a fresh metrics token: the stop revoked the last one (``revoke_token``). The test
    driver keeps no file contents: the seed is made, but only its volume is kept."""
    name = seed_volume(vm.pk)
    vol = lookup(pool.storageVolLookupByName, name)
    if vol is None:
        vol = pool.createXML(
            f"<volume><name>{name}</name><capacity unit='KiB'>1024</capacity>"
            "<target><format type='raw'/></target></volume>",
            0,
        )
    files = guest.seed_files(
        vm,
        fabric_address=address,
        portal_url=settings.LIBVIRT_PORTAL_URL,
        metrics_token=hooks.agent_tokens().issue(vm.pk, actor=None)[1],
        ssh_keys=guest.public_keys(vm),
    )
    if host.uri.startswith("test:"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, name)
        guest.write_seed_iso(files, path)
        data = path.read_bytes()
    stream = vol.connect().newStream(0)
    vol.upload(stream, 0, len(data), 0)
    stream.send(data)
    stream.finish()


def revoke_token(vm_id):
    """A stopped VM's seed (and the env file its guest wrote from it) holds no token that
    writes: the one its last start issued is revoked, through the service that issued it
    (the metrics app's, registered in ``hooks``; none registered: none was issued)."""
    if hooks.has_agent_tokens():
        hooks.agent_tokens().revoke(vm_id, actor=None)


def own_domain(conn, vm_id):
    """The VM's domain on ``conn`` found by its UUID: a domain with its name and another
    UUID is another portal's, never ours to stop or remove."""
    return lookup(conn.lookupByUUIDString, domain_uuid(vm_id))


def remove_domain(host, vm_id):
    conn = connect(host)
    dom = own_domain(conn, vm_id)
    if dom is not None:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    management.release(conn, vm_id)
    pool = lookup(conn.storagePoolLookupByName, host.storage_pool)
    if pool is None:
        return
    for name in (disk_volume(vm_id), seed_volume(vm_id)):
        vol = lookup(pool.storageVolLookupByName, name)
        if vol is not None:
            vol.delete(0)
