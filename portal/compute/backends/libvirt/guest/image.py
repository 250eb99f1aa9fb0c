"""The small Debian guest the libvirt backend boots, built from Debian's packages alone.

Three cached layers under ``var/guest/``, each rebuilt only when its own inputs change:

- ``rootfs-<key>.tar``: ``mmdebstrap --variant=minbase`` of ``SUITE`` with ``PACKAGES``
  (Python, psutil, pip, PyYAML, busybox, the QEMU guest agent, rdma-core and its tools,
  perftest, OpenSSH's server, Open MPI with mpi4py); key = suite + packages;
- ``kernel-<version>-<modules>/``: the ``linux-image-amd64`` package fetched with
  ``apt-get download`` and unpacked with ``dpkg-deb -x`` (nothing is installed on the host);
  its XZ-compressed bzImage is decompressed once into ``vmlinux``, booted directly via PVH
  (decompressing under TCG costs 7–17 s per boot), and the modules the guest needs
  (``MODULES`` and what they depend on) are kept in load order for the initramfs; key =
  kernel package + ``MODULES``;
- ``image-<key>/``: ``base.qcow2`` (the root file system, label ``vc-root``, with the metrics
  agent installed by pip from a wheel built from ``metrics/vm_agent``), ``initrd.img`` (busybox
  and the modules) and ``vmlinux``; key = rootfs + kernel + wheel sources + ``files/``.

``current()`` answers the newest complete image; ``build()`` makes it."""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from . import kernel as guest_kernel
from .steps import ImageError
from .steps import log as _log
from .steps import run as _run

SUITE = "bookworm"
PACKAGES = (
    "python3",
    "python3-psutil",
    "python3-pip",
    "python3-yaml",
    "busybox-static",
    "qemu-guest-agent",
    "ca-certificates",
    # The fabric's RDMA: verbs and its providers (Soft-RoCE's among them), ``rdma`` (iproute2)
    # to add a Soft-RoCE link, the diagnostics and perftest; SSH and an MPI over the fabric.
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "infiniband-diags",
    "perftest",
    "iproute2",
    "openssh-server",
    "openmpi-bin",
    "python3-mpi4py",
)
# virtio disk/NIC/console/rng, ext4 (crc32c is asked for by name, so it is listed), the seed's
# CD-ROM (IDE or SATA) and ISO 9660, the ACPI power button and evdev (busybox acpid reads it).
ROOT_SIZE = "1G"
ROOT_LABEL = "vc-root"
CMDLINE = f"console=ttyS0 root=LABEL={ROOT_LABEL} rw quiet"
FILES = Path(__file__).with_name("files")
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
    "vc-soft-roce": ("usr/local/sbin/vc-soft-roce", 0o755),
    "vc-sshd-run": ("usr/local/sbin/vc-sshd-run", 0o755),
    "sshd-vc.conf": ("etc/ssh/sshd_config.d/vc.conf", 0o644),
}
# busybox is init and the power-off; its other applets fill what minbase lacks (udhcpc, acpid,
# findfs, killall, ping), never replacing a Debian program (iproute2's ip, say).
BUSYBOX_OWNS = ("sbin/init", "sbin/poweroff", "sbin/reboot", "sbin/halt")
BASE_VOLUME = "vc-base-{key}.qcow2"  # the image's base volume in a host's storage pool
BOOT_SUFFIXES = (".vmlinux", ".initrd")  # its kernel and initramfs there, beside it


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

    @property
    def boot_volumes(self) -> dict[str, Path]:
        """The pool's names of its kernel and initramfs, and the files they are made from."""
        stem = self.base_volume_name.removesuffix(".qcow2")
        return dict(zip((stem + s for s in BOOT_SUFFIXES), (self.kernel, self.initrd), strict=True))


def root() -> Path:
    return Path(
        getattr(settings, "GUEST_IMAGE_DIR", None) or Path(settings.BASE_DIR) / "var" / "guest"
    )


def _digest(*parts) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, bytes) else json.dumps(part).encode())
    return sha.hexdigest()[:16]


def _tree_digest(directory: Path, pattern="*") -> str:
    files = sorted(p for p in directory.glob(pattern) if p.is_file())
    return _digest(*[p.name.encode() + b"\0" + p.read_bytes() for p in files])


def input_key() -> str:
    return _digest(
        SUITE,
        PACKAGES,
        guest_kernel.MODULES,
        CMDLINE,
        guest_kernel.kernel_version(),
        _tree_digest(AGENT_SOURCE, "*.py"),
        _tree_digest(AGENT_SOURCE, "*.toml"),
        _tree_digest(FILES),
        Path(__file__).read_bytes(),
    )


def current() -> Image | None:
    """The image of the newest complete build, or None before ``build_guest_image``."""
    pointer = root() / "current.json"
    if not pointer.exists():
        return None
    directory = root() / json.loads(pointer.read_text())["image"]
    return _image(directory) if (directory / "manifest.json").exists() else None


def _image(directory: Path) -> Image:
    return Image(
        directory,
        directory / "vmlinux",
        directory / "initrd.img",
        directory / "base.qcow2",
        CMDLINE,
    )


def build(out=sys.stdout, force=False) -> tuple[Image, bool]:
    """(the image for today's inputs, whether it was built now)."""
    base = root()
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)  # noqa: S103 - readable by the portal's other users (guest_install copies it)
    key = input_key()
    directory = base / f"image-{key}"
    if (directory / "manifest.json").exists() and not force:
        _point(base, directory)
        return _image(directory), False
    started = time.monotonic()
    rootfs = _rootfs(base, out)
    kernel = guest_kernel.fetch(base, out)
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
        _run(
            ["mkfs.ext4", "-q", "-F", "-L", ROOT_LABEL, "-d", str(tree), str(raw), ROOT_SIZE],
            "mkfs",
        )
        _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(work / "base.qcow2")], "qemu-img")
        raw.unlink()
        shutil.rmtree(tree)
        busybox = work / "busybox"
        (work / "initrd.img").write_bytes(guest_kernel.initramfs(busybox, kernel, FILES / "init"))
        busybox.unlink()
        shutil.copyfile(kernel / "vmlinux", work / "vmlinux")
        (work / "manifest.json").write_text(
            json.dumps(
                {
                    "key": key,
                    "suite": SUITE,
                    "packages": PACKAGES,
                    "kernel": kernel.name,
                    "wheel": wheel.name,
                    "cmdline": CMDLINE,
                    "seconds": round(time.monotonic() - started, 1),
                },
                indent=1,
            )
        )
        for path in work.iterdir():
            os.chmod(path, 0o644)
        os.chmod(work, 0o755)  # noqa: S103 - the image is read by libvirt's qemu user
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
    _run(
        [
            "mmdebstrap",
            "--variant=minbase",
            "--format=tar",
            "--quiet",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(partial),
        ],
        "mmdebstrap",
    )
    partial.rename(tar)
    return tar


def _wheel(base: Path, out) -> Path:
    """The agent's wheel, built by pip from ``metrics/vm_agent`` (its own pyproject)."""
    directory = (
        base / f"wheel-{_tree_digest(AGENT_SOURCE, '*.py')}-{_tree_digest(AGENT_SOURCE, '*.toml')}"
    )
    wheels = list(directory.glob("*.whl"))
    if wheels:
        return wheels[0]
    _log(out, "building the agent's wheel (pip wheel metrics/vm_agent)")
    work = Path(tempfile.mkdtemp(prefix="wheel-", dir=base))
    try:
        source = work / "src"  # pip builds in place: keep build/ out of the repository
        shutil.copytree(AGENT_SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
                "-w",
                str(work / "out"),
                str(source),
            ],
            "pip wheel",
        )
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
    for key in (tree / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()  # made by openssh-server's install: each guest makes its own at first boot
    (tree / "etc" / "hostname").write_text("vc-guest\n")
    (tree / "etc" / "resolv.conf").unlink(missing_ok=True)
    _log(out, f"installing {wheel.name} with pip inside the guest")
    shutil.copyfile(wheel, tree / "tmp" / wheel.name)
    _run(
        [
            "chroot",
            str(tree),
            "python3",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--break-system-packages",
            "--disable-pip-version-check",
            f"/tmp/{wheel.name}",  # noqa: S108 - a path inside the guest's image
        ],
        "pip install (in the guest)",
    )
    (tree / "tmp" / wheel.name).unlink()
    if not (tree / "usr" / "local" / "bin" / "vc-metrics-agent").exists():
        raise ImageError("pip install (in the guest): no vc-metrics-agent console script")
    shutil.copyfile(tree / "bin" / "busybox", tree.parent / "busybox")
    for cache in (tree / "var" / "cache" / "apt").glob("*.bin"):
        cache.unlink()
