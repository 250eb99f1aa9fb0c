"""The small Debian guest the libvirt backend boots, built from Debian's packages alone.

Three cached layers under ``var/guest/``, each rebuilt only when its own inputs change:

- ``rootfs-<key>.tar``: ``mmdebstrap --variant=minbase`` of ``SUITE`` with ``PACKAGES``
  (Python, psutil, pip, PyYAML, busybox, the QEMU guest agent); key = suite + packages;
- ``kernel-<version>/``: the ``linux-image-amd64`` package fetched with ``apt-get download``
  and unpacked with ``dpkg-deb -x`` (nothing is installed on the host); its XZ-compressed
  bzImage is decompressed once into ``vmlinux``, booted directly via PVH (decompressing under
  TCG costs 7–17 s per boot), and the modules the guest needs (``MODULES`` and what they
  depend on) are kept in load order for the initramfs;
- ``image-<key>/``: ``base.qcow2`` (the root file system, label ``vc-root``, with the metrics
  agent installed by pip from a wheel built from ``metrics/vm_agent``), ``initrd.img`` (busybox
  and the modules) and ``vmlinux``; key = rootfs + kernel + wheel sources + ``guest_files/``.

``current()`` answers the newest complete image; ``build()`` makes it."""

import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

SUITE = "bookworm"
PACKAGES = ("python3", "python3-psutil", "python3-pip", "python3-yaml", "busybox-static",
            "qemu-guest-agent", "ca-certificates")
KERNEL_PACKAGE = "linux-image-amd64"
# virtio disk/NIC/console/rng, ext4 (crc32c is asked for by name, so it is listed), the seed's
# CD-ROM (IDE or SATA) and ISO 9660, the ACPI power button and evdev (busybox acpid reads it).
MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "virtio_console", "virtio_rng",
           "virtio_scsi", "crc32c_generic", "ext4", "isofs", "ata_piix", "ahci", "sr_mod",
           "button", "evdev")
ROOT_SIZE = "1G"
ROOT_LABEL = "vc-root"
CMDLINE = f"console=ttyS0 root=LABEL={ROOT_LABEL} rw quiet"
FILES = Path(__file__).with_name("guest_files")
AGENT_SOURCE = Path(settings.BASE_DIR) / "metrics" / "vm_agent"
# guest file -> (path in the image, mode)
PLACED = {
    "inittab": ("etc/inittab", 0o644),
    "rcS": ("etc/vc/rcS", 0o755),
    "rcK": ("etc/vc/rcK", 0o755),
    "udhcpc.script": ("etc/vc/udhcpc.script", 0o755),
    "power-button": ("etc/acpi/PWRF/00000080", 0o755),
    "shutdown": ("sbin/shutdown", 0o755),
    "vc-nocloud": ("usr/local/sbin/vc-nocloud", 0o755),
    "vc-agent-run": ("usr/local/sbin/vc-agent-run", 0o755),
}
# busybox is init and the power-off; its other applets fill what minbase lacks (ip, udhcpc,
# acpid, findfs, killall, ping), never replacing a Debian program.
BUSYBOX_OWNS = ("sbin/init", "sbin/poweroff", "sbin/reboot", "sbin/halt")
BASE_VOLUME = "vc-base-{key}.qcow2"  # the image's base volume in a host's storage pool


class ImageError(Exception):
    """A step of the build failed; the message says which and why."""


@dataclass(frozen=True)
class Image:
    directory: Path
    kernel: Path
    initrd: Path
    base_volume: Path
    cmdline: str

    @property
    def base_volume_name(self) -> str:
        """Its name in a host's storage pool (``guest_install``)."""
        return BASE_VOLUME.format(key=self.directory.name.removeprefix("image-"))


def root() -> Path:
    return Path(getattr(settings, "GUEST_IMAGE_DIR", None) or Path(settings.BASE_DIR) / "var"
                / "guest")


def _digest(*parts) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, bytes) else json.dumps(part).encode())
    return sha.hexdigest()[:16]


def _tree_digest(directory: Path, pattern="*") -> str:
    files = sorted(p for p in directory.glob(pattern) if p.is_file())
    return _digest(*[p.name.encode() + b"\0" + p.read_bytes() for p in files])


def _run(argv, step, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise ImageError(f"{step}: {' '.join(map(str, argv))} exited {done.returncode}: "
                         f"{(done.stderr or done.stdout)[-2000:]}")
    return done.stdout


def _log(out, message):
    if out is not None:
        out.write(message + "\n")
        out.flush()


def kernel_version() -> str:
    """The versioned kernel package ``linux-image-amd64`` depends on (``apt-cache``)."""
    out = _run(["apt-cache", "depends", KERNEL_PACKAGE], "kernel")
    for line in out.splitlines():
        name = line.split(":", 1)[-1].strip()
        if line.strip().startswith("Depends:") and name.startswith("linux-image-"):
            return name
    raise ImageError(f"kernel: {KERNEL_PACKAGE} names no kernel package")


def input_key() -> str:
    return _digest(SUITE, PACKAGES, MODULES, CMDLINE, kernel_version(),
                   _tree_digest(AGENT_SOURCE, "*.py"), _tree_digest(AGENT_SOURCE, "*.toml"),
                   _tree_digest(FILES), Path(__file__).read_bytes())


def current() -> Image | None:
    """The image of the newest complete build, or None before ``build_guest_image``."""
    pointer = root() / "current.json"
    if not pointer.exists():
        return None
    directory = root() / json.loads(pointer.read_text())["image"]
    return _image(directory) if (directory / "manifest.json").exists() else None


def _image(directory: Path) -> Image:
    return Image(directory, directory / "vmlinux", directory / "initrd.img",
                 directory / "base.qcow2", CMDLINE)


def build(out=sys.stdout, force=False) -> tuple[Image, bool]:
    """(the image for today's inputs, whether it was built now)."""
    base = root()
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)  # QEMU runs as another user and reads kernel and disk from here
    key = input_key()
    directory = base / f"image-{key}"
    if (directory / "manifest.json").exists() and not force:
        _point(base, directory)
        return _image(directory), False
    started = time.monotonic()
    rootfs = _rootfs(base, out)
    kernel = _kernel(base, out)
    wheel = _wheel(base, out)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=base))
    try:
        tree = work / "root"
        tree.mkdir()
        _log(out, "unpacking the root file system")
        _run(["tar", "-xf", str(rootfs), "-C", str(tree)], "rootfs")
        _customise(tree, wheel, out)
        _log(out, "making the ext4 file system and the qcow2 base volume")
        raw = work / "base.raw"
        _run(["mkfs.ext4", "-q", "-F", "-L", ROOT_LABEL, "-d", str(tree), str(raw), ROOT_SIZE],
             "mkfs")
        _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(work / "base.qcow2")],
             "qemu-img")
        raw.unlink()
        shutil.rmtree(tree)
        busybox = work / "busybox"
        (work / "initrd.img").write_bytes(_initramfs(busybox, kernel))
        busybox.unlink()
        shutil.copyfile(kernel / "vmlinux", work / "vmlinux")
        (work / "manifest.json").write_text(json.dumps({
            "key": key, "suite": SUITE, "packages": PACKAGES, "kernel": kernel.name,
            "wheel": wheel.name, "cmdline": CMDLINE,
            "seconds": round(time.monotonic() - started, 1)}, indent=1))
        for path in work.iterdir():
            os.chmod(path, 0o644)
        os.chmod(work, 0o755)
        if directory.exists():
            shutil.rmtree(directory)
        work.rename(directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _point(base, directory)
    _log(out, f"guest image {directory.name} built in {time.monotonic() - started:.0f} s")
    return _image(directory), True


def _point(base: Path, directory: Path):
    pointer = base / "current.json"
    temporary = pointer.with_suffix(".tmp")
    temporary.write_text(json.dumps({"image": directory.name}))
    temporary.replace(pointer)


def _rootfs(base: Path, out) -> Path:
    tar = base / f"rootfs-{_digest(SUITE, PACKAGES)}.tar"
    if tar.exists():
        return tar
    _log(out, f"mmdebstrap {SUITE} ({', '.join(PACKAGES)}): about 2 minutes")
    partial = tar.with_suffix(".partial")
    _run(["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet",
          f"--include={','.join(PACKAGES)}",
          SUITE, str(partial)], "mmdebstrap")
    partial.rename(tar)
    return tar


def _kernel(base: Path, out) -> Path:
    package = kernel_version()
    directory = base / f"kernel-{package}"
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
            "\n".join(Path(relative).name for relative in order) + "\n")
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
    by_name = {_module_name(path.name): str(path.relative_to(modules_root))
               for path in modules_root.rglob("*.ko")}
    order, seen = [], set()

    def visit(path):
        if path in seen:
            return
        seen.add(path)
        data = (modules_root / path).read_bytes()
        start = data.find(b"\0depends=")
        needs = data[start + 9:data.index(b"\0", start + 1)].decode() if start >= 0 else ""
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


def _wheel(base: Path, out) -> Path:
    """The agent's wheel, built by pip from ``metrics/vm_agent`` (its own pyproject)."""
    directory = base / f"wheel-{_tree_digest(AGENT_SOURCE, '*.py')}-" \
                       f"{_tree_digest(AGENT_SOURCE, '*.toml')}"
    wheels = list(directory.glob("*.whl"))
    if wheels:
        return wheels[0]
    _log(out, "building the agent's wheel (pip wheel metrics/vm_agent)")
    work = Path(tempfile.mkdtemp(prefix="wheel-", dir=base))
    try:
        source = work / "src"  # pip builds in place: keep build/ out of the repository
        shutil.copytree(AGENT_SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
              "--disable-pip-version-check", "-w", str(work / "out"), str(source)], "pip wheel")
        (work / "out").rename(directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return next(directory.glob("*.whl"))


def _customise(tree: Path, wheel: Path, out):
    """The guest's own files, busybox as init, and the agent installed by pip from its wheel."""
    for name, (target, mode) in PLACED.items():
        path = tree / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FILES / name, path)
        os.chmod(path, mode)
    applets = _run([str(tree / "bin" / "busybox"), "--list-full"], "busybox").split()
    for link in (*BUSYBOX_OWNS, *applets):
        path = tree / link
        if link in BUSYBOX_OWNS and (path.exists() or path.is_symlink()):
            path.unlink()
        if not (path.exists() or path.is_symlink()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to("/bin/busybox")
    (tree / "etc" / "hostname").write_text("vc-guest\n")
    (tree / "etc" / "resolv.conf").unlink(missing_ok=True)
    _log(out, f"installing {wheel.name} with pip inside the guest")
    shutil.copyfile(wheel, tree / "tmp" / wheel.name)
    _run(["chroot", str(tree), "python3", "-m", "pip", "install", "--quiet", "--no-index",
          "--break-system-packages", "--disable-pip-version-check", f"/tmp/{wheel.name}"],
         "pip install (in the guest)")
    (tree / "tmp" / wheel.name).unlink()
    if not (tree / "usr" / "local" / "bin" / "vc-metrics-agent").exists():
        raise ImageError("pip install (in the guest): no vc-metrics-agent console script")
    shutil.copyfile(tree / "bin" / "busybox", tree.parent / "busybox")
    for cache in (tree / "var" / "cache" / "apt").glob("*.bin"):
        cache.unlink()


def _initramfs(busybox: Path, kernel: Path) -> bytes:
    """A gzipped newc cpio: busybox, ``guest_files/init`` and the kernel's modules in order."""
    archive = io.BytesIO()
    inode = iter(range(1, 1_000_000))

    def add(name, mode, data=b"", rdev=(0, 0)):
        header = "070701" + "".join(f"{value:08x}" for value in (
            next(inode), mode, 0, 0, 1, 0, len(data), 0, 0, *rdev, len(name) + 1, 0))
        archive.write(header.encode() + name.encode() + b"\0")
        archive.write(b"\0" * (-archive.tell() % 4))
        archive.write(data)
        archive.write(b"\0" * (-archive.tell() % 4))

    for directory in ("bin", "dev", "proc", "sys", "newroot", "modules"):
        add(directory, stat.S_IFDIR | 0o755)
    add("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))  # the kernel opens it before devtmpfs
    add("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes())
    add("init", stat.S_IFREG | 0o755, (FILES / "init").read_bytes())
    add("modules.order", stat.S_IFREG | 0o644, (kernel / "modules.order").read_bytes())
    for module in (kernel / "modules.order").read_text().split():
        add(f"modules/{module}", stat.S_IFREG | 0o644, (kernel / "modules" / module).read_bytes())
    add("TRAILER!!!", 0)
    return gzip.compress(archive.getvalue(), compresslevel=6, mtime=0)
