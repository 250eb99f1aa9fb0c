"""Put the built guest image where a host's domains use it: the host's storage pool (a
directory pool under ``/var/lib/libvirt/images`` is defined when the host has none) gets the
image's base volume (``vc-base-<key>.qcow2``, uploaded through libvirt's stream API, so a
remote ``qemu+ssh://`` host works the same), on which each VM's overlay is made, and its
kernel and initramfs (``vc-base-<key>.vmlinux``, ``.initrd``, mode 0644), which the domains
boot from there: never from the portal's checkout, which the hypervisor's user may not be
able to enter (a clone in a 0700 folder), and which a remote host does not have."""

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from portal.compute.backends.libvirt.connection import connect, lookup

from . import image as guest_image

POOL_ROOT = Path("/var/lib/libvirt/images")
BASE_PREFIX = guest_image.BASE_VOLUME.split("{", 1)[0]  # vc-base-
CHUNK = 4 << 20


def ensure_pool(conn, name):
    """The host's storage pool, defined as a directory pool, built and started if needed."""
    pool = lookup(conn.storagePoolLookupByName, name)
    if pool is None:
        target = POOL_ROOT / name
        pool = conn.storagePoolDefineXML(
            f"<pool type='dir'><name>{name}</name><target><path>{target}</path></target></pool>", 0
        )
        pool.build(0)
        pool.setAutostart(True)
    if not pool.isActive():
        pool.create(0)
    return pool


def virtual_size(path: Path) -> int:
    """The disk size a qcow2 image gives its guest (not the file's size)."""
    done = subprocess.run(  # noqa: S603 - a fixed argument list
        ["qemu-img", "info", "--output=json", str(path)],  # noqa: S607 - qemu-img from PATH
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise guest_image.ImageError(f"qemu-img info {path}: {done.stderr[-2000:]}")
    return int(json.loads(done.stdout)["virtual-size"])


def ensure_base(pool, image: "guest_image.Image") -> str:
    """The image's base volume in ``pool`` (uploaded once); returns its name.

    A base whose disk is not the image's (an interrupted or mis-converted copy: its capacity
    differs from the image's virtual size) is deleted and uploaded again, never booted: a
    guest on it finds no root file system and sits in its initramfs."""
    name = image.base_volume_name
    want = virtual_size(image.base_volume)
    existing = lookup(pool.storageVolLookupByName, name)
    if existing is not None:
        if existing.info()[1] == want:
            return name
        existing.delete(0)
    size = image.base_volume.stat().st_size
    partial = f"{name}.partial"
    stale = lookup(pool.storageVolLookupByName, partial)
    if stale is not None:
        stale.delete(0)
    volume = pool.createXML(
        f"<volume><name>{partial}</name><capacity unit='B'>{size}</capacity>"
        "<target><format type='qcow2'/></target></volume>",
        0,
    )
    stream = pool.connect().newStream(0)
    volume.upload(stream, 0, size, 0)
    with image.base_volume.open("rb") as source:
        while chunk := source.read(CHUNK):
            stream.send(chunk)
    stream.finish()
    # libvirt reads the uploaded file's qcow2 header again, so the clone below copies qcow2 to
    # qcow2; taken as raw, the clone would be a disk holding the qcow2 file's bytes.
    pool.refresh(0)
    volume = pool.storageVolLookupByName(partial)
    # A volume is renamed by cloning it: write the final name only once the upload is whole.
    pool.createXMLFrom(
        f"<volume><name>{name}</name><capacity unit='B'>{want}</capacity>"
        "<target><format type='qcow2'/></target></volume>",
        volume,
        0,
    )
    volume.delete(0)
    pool.refresh(0)
    made = pool.storageVolLookupByName(name)
    if made.info()[1] != want:
        made.delete(0)
        raise guest_image.ImageError(f"{name}: the copy in the pool is not the image's disk")
    prune_bases(pool, keep=name)
    return name


def ensure_boot_files(pool, image: "guest_image.Image") -> None:
    """The image's kernel and initramfs in ``pool``, uploaded once each (again if a copy's
    size is not the file's: an interrupted upload)."""
    for name, path in image.boot_volumes.items():
        size = path.stat().st_size
        existing = lookup(pool.storageVolLookupByName, name)
        if existing is not None:
            if existing.info()[1] == size:
                continue
            existing.delete(0)
        _upload_raw(pool, name, path, size)


def _upload_raw(pool, name: str, path: Path, size: int) -> None:
    """``path`` as the raw volume ``name``, readable by every user (the hypervisor's among
    them); the final name is written only once the upload is whole."""
    partial = f"{name}.partial"
    stale = lookup(pool.storageVolLookupByName, partial)
    if stale is not None:
        stale.delete(0)
    target = "<target><format type='raw'/><permissions><mode>0644</mode></permissions></target>"
    volume = pool.createXML(
        f"<volume><name>{partial}</name><capacity unit='B'>{size}</capacity>{target}</volume>", 0
    )
    stream = pool.connect().newStream(0)
    volume.upload(stream, 0, size, 0)
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            stream.send(chunk)
    stream.finish()
    pool.createXMLFrom(
        f"<volume><name>{name}</name><capacity unit='B'>{size}</capacity>{target}</volume>",
        volume,
        0,
    )
    volume.delete(0)
    pool.refresh(0)


def boot_paths(pool, image: "guest_image.Image") -> tuple[str, str] | None:
    """The paths on the host of the image's kernel and initramfs in ``pool``; None if they
    were never installed there."""
    found = [lookup(pool.storageVolLookupByName, name) for name in image.boot_volumes]
    if None in found:
        return None
    kernel, initrd = (volume.path() for volume in found)
    return kernel, initrd


def prune_bases(pool, keep: str) -> list[str]:
    """Delete the base volumes of earlier images that no volume of the pool is backed by any
    more (a VM made on an old image keeps its base until the VM is deleted); returns their
    names. Run when a new base arrives, so a pool holds one base per image still in use."""
    names = pool.listVolumes()
    bases = {n for n in names if n.startswith(BASE_PREFIX) and n != keep and n.endswith(".qcow2")}
    if not bases:
        return []
    paths = {pool.storageVolLookupByName(n).path(): n for n in bases}
    for other in set(names) - bases:
        desc = ET.fromstring(pool.storageVolLookupByName(other).XMLDesc(0))  # noqa: S314 - libvirtd's own XML
        for used in desc.iterfind("backingStore/path"):
            paths.pop(used.text or "", None)
    for name in paths.values():
        pool.storageVolLookupByName(name).delete(0)
    gone = {name.removesuffix(".qcow2") for name in paths.values()}
    for name in names:  # their kernels and initramfs go with them
        if any(name == stem + suffix for stem in gone for suffix in guest_image.BOOT_SUFFIXES):
            pool.storageVolLookupByName(name).delete(0)
    return sorted(paths.values())


def install(host, image=None) -> str:
    """Pool and base volume of ``image`` (default: the current build) on ``host``."""
    image = image or guest_image.current()
    if image is None:
        raise guest_image.ImageError("no guest image: run manage.py build_guest_image first")
    pool = ensure_pool(connect(host), host.storage_pool)
    ensure_boot_files(pool, image)
    return ensure_base(pool, image)
