"""A host's pool keeps the base volume of every guest image a VM still stands on, and no
other: a new image's base prunes the bases nothing is backed by any more."""

import libvirt
import pytest

from portal.compute.backends.libvirt.guest.install import prune_bases

VOLUME = (
    "<volume><name>{name}</name><capacity>4096</capacity>"
    "<target><format type='qcow2'/></target>{backing}</volume>"
)


@pytest.fixture
def pool():
    conn = libvirt.open("test:///default")  # in memory, shared by the process's connections
    pool = conn.storagePoolLookupByName("default-pool")
    before = set(pool.listVolumes())
    yield pool
    for name in set(pool.listVolumes()) - before:
        pool.storageVolLookupByName(name).delete(0)
    conn.close()


def volume(pool, name, on=None):
    backing = ""
    if on is not None:
        path = pool.storageVolLookupByName(on).path()
        backing = f"<backingStore><path>{path}</path><format type='qcow2'/></backingStore>"
    pool.createXML(VOLUME.format(name=name, backing=backing), 0)


def test_a_new_base_prunes_the_old_bases_no_vm_stands_on(pool):
    for key in ("old", "used", "new"):
        volume(pool, f"vc-base-{key}.qcow2")
    volume(pool, "vc-base-next.qcow2.partial")  # another upload, not yet whole
    volume(pool, "vc-vm-7.qcow2", on="vc-base-used.qcow2")
    volume(pool, "unrelated.img")

    assert prune_bases(pool, keep="vc-base-new.qcow2") == ["vc-base-old.qcow2"]
    assert sorted(pool.listVolumes()) == [
        "unrelated.img",
        "vc-base-new.qcow2",
        "vc-base-next.qcow2.partial",
        "vc-base-used.qcow2",
        "vc-vm-7.qcow2",
    ]
    pool.storageVolLookupByName("vc-vm-7.qcow2").delete(0)  # the last VM on it is deleted
    assert prune_bases(pool, keep="vc-base-new.qcow2") == ["vc-base-used.qcow2"]
    assert prune_bases(pool, keep="vc-base-new.qcow2") == []


def test_an_old_base_takes_its_kernel_and_initramfs_with_it(pool):
    for key in ("old", "new"):
        for suffix in (".qcow2", ".vmlinux", ".initrd"):
            volume(pool, f"vc-base-{key}{suffix}")

    assert prune_bases(pool, keep="vc-base-new.qcow2") == ["vc-base-old.qcow2"]
    assert sorted(pool.listVolumes()) == [
        "vc-base-new.initrd",
        "vc-base-new.qcow2",
        "vc-base-new.vmlinux",
    ]
