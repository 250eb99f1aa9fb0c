"""The guest's side of the fabric and of SSH: Soft-RoCE's modules reach the initramfs in load
order, the kernel layer is keyed by the modules it keeps, the guest links Soft-RoCE only to
the NIC the portal gives the fabric's MAC, and sshd is kept running with logins by key."""

import fnmatch
import re

import pytest

from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.backends.libvirt.guest import image as guest_image
from portal.compute.backends.libvirt.guest import kernel as guest_kernel

SOFT_ROCE = ("crc32_generic", "udp_tunnel", "ip6_udp_tunnel", "ib_core", "ib_uverbs", "rdma_rxe")


class Vm:
    def __init__(self, pk):
        self.pk = pk


def fake_module(root, relative, depends=""):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF\0license=GPL\0depends=" + depends.encode() + b"\0vermagic=6\0")


def test_soft_roce_modules_load_after_what_they_need(tmp_path):
    assert set(SOFT_ROCE) <= set(guest_kernel.MODULES)
    fake_module(tmp_path, "kernel/crypto/crc32_generic.ko")
    fake_module(tmp_path, "kernel/net/ipv4/udp_tunnel.ko")
    fake_module(tmp_path, "kernel/net/ipv6/ip6_udp_tunnel.ko")
    fake_module(tmp_path, "kernel/drivers/infiniband/core/ib_core.ko")
    fake_module(tmp_path, "kernel/drivers/infiniband/core/ib_uverbs.ko", "ib_core")
    fake_module(
        tmp_path,
        "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko",
        "ib_uverbs,ib_core,udp_tunnel,ip6_udp_tunnel",
    )
    order = [path.rsplit("/", 1)[1] for path in guest_kernel._module_order(tmp_path)]
    assert set(order) == {f"{name}.ko" for name in SOFT_ROCE}
    for needed in ("ib_core.ko", "ib_uverbs.ko", "udp_tunnel.ko", "ip6_udp_tunnel.ko"):
        assert order.index(needed) < order.index("rdma_rxe.ko")


def test_the_kernel_layer_is_keyed_by_the_modules_it_keeps(tmp_path, monkeypatch):
    package = "linux-image-6.1.0-9-amd64"
    monkeypatch.setattr(guest_kernel, "kernel_version", lambda: package)
    monkeypatch.setattr(guest_kernel, "_run", _no_download)
    monkeypatch.setattr(guest_kernel, "MODULES", ("virtio_net",))
    built = guest_kernel.layer(tmp_path, package)
    built.mkdir()
    (built / "modules.order").write_text("virtio_net.ko\n")
    assert guest_kernel.fetch(tmp_path, None) == built
    monkeypatch.setattr(guest_kernel, "MODULES", ("virtio_net", "rdma_rxe"))
    assert guest_kernel.layer(tmp_path, package) != built
    with pytest.raises(AssertionError, match="apt-get download"):
        guest_kernel.fetch(tmp_path, None)  # a layer without rdma_rxe is not reused


def _no_download(argv, step, **kwargs):
    raise AssertionError(step)


def test_the_guest_links_soft_roce_only_to_the_fabric_nic_of_a_virtio_device():
    script = (guest_image.FILES / "vc-soft-roce").read_text()
    (pattern,) = re.findall(r"case .*address.* in (\S+)\)", script)
    assert fnmatch.fnmatch(guest.fabric_mac(Vm(0x1234)), pattern)
    assert not fnmatch.fnmatch("52:54:00:12:34:56", pattern)  # the management NIC's kind
    assert "virtio_net" in script and "rdma link add" in script
    assert guest_image.PLACED["vc-soft-roce"][0] == "usr/local/sbin/vc-soft-roce"
    rcs = (guest_image.FILES / "rcS").read_text()
    assert rcs.index("vc-nocloud") < rcs.index("vc-soft-roce")  # once the NIC is up


def test_sshd_is_kept_running_with_logins_by_key_only():
    inittab = (guest_image.FILES / "inittab").read_text()
    assert "::respawn:/usr/local/sbin/vc-sshd-run" in inittab.splitlines()
    run = (guest_image.FILES / "vc-sshd-run").read_text()
    assert "ssh-keygen" in run and "exec /usr/sbin/sshd -D" in run
    target, mode = guest_image.PLACED["sshd-vc.conf"]
    assert target.startswith("etc/ssh/sshd_config.d/") and target.endswith(".conf")
    settings = (guest_image.FILES / "sshd-vc.conf").read_text().splitlines()
    assert "PasswordAuthentication no" in settings
    for package in ("openssh-server", "rdma-core", "perftest", "openmpi-bin", "python3-mpi4py"):
        assert package in guest_image.PACKAGES
