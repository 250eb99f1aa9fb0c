"""The guest's kernel, from Debian's ``linux-image-amd64`` without installing it on the host:
fetched with ``apt-get download``, unpacked with ``dpkg-deb -x``, its XZ-compressed bzImage
decompressed once into ``vmlinux`` (booted directly via PVH: decompressing under TCG costs
7–17 s per boot), and the modules the guest needs kept in load order for the initramfs."""

import gzip
import hashlib
import io
import lzma
import shutil
import stat
import tempfile
from pathlib import Path

from .steps import ImageError
from .steps import log as _log
from .steps import run as _run

KERNEL_PACKAGE = "linux-image-amd64"

MODULES = (
    "virtio_pci",
    "virtio_blk",
    "virtio_net",
    "virtio_console",
    "virtio_rng",
    "virtio_scsi",
    "crc32c_generic",
    "ext4",
    "isofs",
    "ata_piix",
    "ahci",
    "sr_mod",
    "button",
    "evdev",
    # Soft-RoCE on an emulated fabric NIC: RDMA's core, user verbs and MADs (ibv_devinfo,
    # ibstat, perftest), the RDMA connection manager, and the driver; RoCEv2's ICRC is a
    # CRC32 the driver asks the crypto API for by name (so crc32_generic is listed), its
    # packets ride UDP tunnels.
    "crc32_generic",
    "udp_tunnel",
    "ip6_udp_tunnel",
    "ib_core",
    "ib_uverbs",
    "ib_umad",
    "rdma_ucm",
    "rdma_rxe",
)


def kernel_version() -> str:
    """The versioned kernel package ``linux-image-amd64`` depends on (``apt-cache``)."""
    out = _run(["apt-cache", "depends", KERNEL_PACKAGE], "kernel")
    for line in out.splitlines():
        name = line.split(":", 1)[-1].strip()
        if line.strip().startswith("Depends:") and name.startswith("linux-image-"):
            return name
    raise ImageError(f"kernel: {KERNEL_PACKAGE} names no kernel package")


def layer(base: Path, package: str) -> Path:
    """The kernel layer's folder: keyed by the package and ``MODULES``, so a module added to
    the list makes a new layer rather than reusing one that lacks it."""
    modules = hashlib.sha256("\n".join(MODULES).encode()).hexdigest()[:8]
    return base / f"kernel-{package}-{modules}"


def fetch(base: Path, out) -> Path:
    package = kernel_version()
    directory = layer(base, package)
    if (directory / "modules.order").exists():
        return directory
    _log(out, f"fetching {package} (apt-get download; the host is untouched)")
    work = Path(tempfile.mkdtemp(prefix="kernel-", dir=base))
    try:
        _run(["apt-get", "download", "-q", package], "apt-get download", cwd=work)
        (deb,) = work.glob("*.deb")
        _run(["dpkg-deb", "-x", str(deb), str(work / "x")], "dpkg-deb")
        (vmlinuz,) = (work / "x" / "boot").glob("vmlinuz-*")
        staged = work / "staged"
        (staged / "modules").mkdir(parents=True)
        (staged / "vmlinux").write_bytes(_decompress(vmlinuz.read_bytes()))
        (modules_root,) = (work / "x" / "lib" / "modules").iterdir()
        order = _module_order(modules_root)
        for relative in order:
            shutil.copyfile(modules_root / relative, staged / "modules" / Path(relative).name)
        (staged / "modules.order").write_text(
            "\n".join(Path(relative).name for relative in order) + "\n"
        )
        staged.rename(directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return directory


def _decompress(bzimage: bytes) -> bytes:
    """The ELF vmlinux inside a bzImage (Debian compresses it with XZ)."""
    start = bzimage.find(b"\xfd7zXZ\x00")
    if start < 0:
        raise ImageError("kernel: no XZ stream in the bzImage")
    elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bzimage[start:])
    if not elf.startswith(b"\x7fELF"):
        raise ImageError("kernel: the bzImage's payload is not an ELF vmlinux")
    return elf


def _module_order(modules_root: Path) -> list[str]:
    """``MODULES`` and their dependencies, each after what it needs. The package ships no
    ``modules.dep`` (depmod makes it at install), so each module's ``.modinfo`` says."""
    by_name = {
        _module_name(path.name): str(path.relative_to(modules_root))
        for path in modules_root.rglob("*.ko")
    }
    order, seen = [], set()

    def visit(path):
        if path in seen:
            return
        seen.add(path)
        data = (modules_root / path).read_bytes()
        start = data.find(b"\0depends=")
        needs = data[start + 9 : data.index(b"\0", start + 1)].decode() if start >= 0 else ""
        for need in filter(None, needs.split(",")):
            if _module_name(need) in by_name:
                visit(by_name[_module_name(need)])
        order.append(path)

    for name in MODULES:
        if name in by_name:  # built into the kernel when it is not a module
            visit(by_name[name])
    return order


def _module_name(name: str) -> str:
    return name.removesuffix(".ko").replace("-", "_")


def initramfs(busybox: Path, kernel: Path, init: Path) -> bytes:
    """A gzipped newc cpio: busybox, ``files/init`` and the kernel's modules in order."""
    archive = io.BytesIO()
    inode = iter(range(1, 1_000_000))

    def add(name, mode, data=b"", rdev=(0, 0)):
        header = "070701" + "".join(
            f"{value:08x}"
            for value in (next(inode), mode, 0, 0, 1, 0, len(data), 0, 0, *rdev, len(name) + 1, 0)
        )
        archive.write(header.encode() + name.encode() + b"\0")
        archive.write(b"\0" * (-archive.tell() % 4))
        archive.write(data)
        archive.write(b"\0" * (-archive.tell() % 4))

    for directory in ("bin", "dev", "proc", "sys", "newroot", "modules"):
        add(directory, stat.S_IFDIR | 0o755)
    add("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))  # the kernel opens it before devtmpfs
    add("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes())
    add("init", stat.S_IFREG | 0o755, init.read_bytes())
    add("modules.order", stat.S_IFREG | 0o644, (kernel / "modules.order").read_bytes())
    for module in (kernel / "modules.order").read_text().split():
        add(f"modules/{module}", stat.S_IFREG | 0o644, (kernel / "modules" / module).read_bytes())
    add("TRAILER!!!", 0)
    return gzip.compress(archive.getvalue(), compresslevel=6, mtime=0)
