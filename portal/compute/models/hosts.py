"""GPU hosts of the libvirt backend, their inventory, what is placed on them, and each
cluster's fabric partition.

A host is one libvirtd (``uri``). Its inventory (GPUs and fabric virtual functions, each with
its NUMA node) is read from the host's node devices by
``portal.compute.backends.libvirt.inventory``;
a host without such devices may instead *declare* emulated GPU and VF slots. A ``Placement``
binds a VM to a host and holds the devices it was given; capacity is the inventory minus
what placements hold.
"""

import ipaddress
import re

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.catalog.models import FabricType, zone_reference
from portal.foundation.errors.hosts import HostUriRefused
from vms.models import cluster_reference, vm_reference

# qemu: a local or remote libvirtd (ssh, tls); test: libvirt's test driver (tests, benches).
URI_SCHEMES = ("qemu", "qemu+ssh", "qemu+tls", "test")
REMOTE_SCHEMES = ("qemu+ssh", "qemu+tls")
QEMU_PATHS = ("/system", "/session")
# The URI parameters the portal opens a host with, per scheme, and the values each may take;
# every other one (command, socket, netcat, keyfile, no_verify, name, pkipath, proxy,
# known_hosts…) is refused: they run programs, read files or turn checks off.
URI_PARAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "qemu": {"mode": ("auto", "direct", "legacy")},
    "qemu+ssh": {"mode": ("auto", "direct", "legacy"), "no_tty": ("1",)},
    "qemu+tls": {},
    "test": {},
}
_URI_CHARS = re.compile(r"[A-Za-z0-9._/:@?&=+\[\]-]*")
_URI = re.compile(
    r"(?P<scheme>[a-z+]+)://(?:(?P<user>[^@/?]*)@)?"
    r"(?P<host>\[[^\]/?@]*\]|[^:/?@\[\]]*)(?::(?P<port>[^/?]*))?"
    r"(?P<path>/[^?]*)?(?:\?(?P<query>.*))?"
)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_SSH_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
_FILE_PART = re.compile(r"[A-Za-z0-9_.-]+")


def uri_refusal(uri: str) -> HostUriRefused | None:
    """Why the portal would not open ``uri``, or None. Allowed, and nothing else:

    - ``qemu:///system`` or ``qemu:///session`` (this machine's libvirtd);
    - ``qemu+ssh://[user@]host[:port]/system`` (or ``/session``): ``user`` of letters,
      digits, ``._-``, not starting with ``-``, no password;
    - ``qemu+tls://host[:port]/system`` (or ``/session``);
    - ``test:///default`` or ``test:///<absolute path>.xml`` (libvirt's test driver);
    - parameters: ``mode=auto|direct|legacy`` (qemu, qemu+ssh) and ``no_tty=1`` (qemu+ssh);
      test and qemu+tls take none.

    A host is a DNS name (labels of letters, digits and ``-``, never starting with ``-``),
    an IPv4 address or a bracketed IPv6 address; a port is 1-65535. The whole URI is of
    letters, digits and ``._/:@?&=+[]-``: no escapes (``%``), no fragment, no spaces.
    """
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if not _URI_CHARS.fullmatch(uri):
        return HostUriRefused(reason="chars")
    if scheme not in URI_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in URI_SCHEMES)
        return HostUriRefused(reason="scheme", schemes=schemes)
    parts = _URI.fullmatch(uri)
    if parts is None:
        return HostUriRefused(reason="host")
    user, host, port, path, query = parts.group("user", "host", "port", "path", "query")
    if user is not None and (scheme != "qemu+ssh" or not _SSH_USER.fullmatch(user)):
        return HostUriRefused(reason="user")
    if scheme not in REMOTE_SCHEMES and (host or port is not None):
        return HostUriRefused(reason="host_forbidden", scheme=scheme)
    if scheme in REMOTE_SCHEMES and not host:
        return HostUriRefused(reason="host_required", scheme=scheme)
    if host and not (_host_ok(host) and _port_ok(port)):
        return HostUriRefused(reason="host")
    if scheme == "test":
        if not _test_path_ok(path or ""):
            return HostUriRefused(reason="test_path")
    elif path not in QEMU_PATHS:
        return HostUriRefused(reason="path", scheme=scheme, paths=", ".join(QEMU_PATHS))
    return _params_refusal(scheme, query or "")


def _host_ok(host: str) -> bool:
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in host.split("."))


def _port_ok(port: str | None) -> bool:
    return port is None or (port.isdigit() and 1 <= int(port) <= 65535)


def _test_path_ok(path: str) -> bool:
    if path == "/default":
        return True
    parts = path.split("/")[1:]
    return (
        path.endswith(".xml")
        and bool(parts)
        and all(_FILE_PART.fullmatch(p) and p not in (".", "..") for p in parts)
    )


def _params_refusal(scheme: str, query: str) -> HostUriRefused | None:
    """Each ``name=value`` of the query is one the scheme allows (libvirt skips empty ones)."""
    allowed = URI_PARAMS[scheme]
    for item in query.split("&"):
        name, _sep, value = item.partition("=")
        if not item or value in allowed.get(name, ()):
            continue
        if not allowed:
            return HostUriRefused(reason="no_params", scheme=scheme, param=item[:60])
        listed = ", ".join(f"{n}={'|'.join(v)}" for n, v in allowed.items())
        return HostUriRefused(reason="param", scheme=scheme, param=item[:60], allowed=listed)
    return None


def uri_help() -> str:
    """The URI field's help in the admin, in the reader's language."""
    return str(URI_HELP) % {
        "params": ", ".join(
            f"{name}={'|'.join(values)} ({scheme})"
            for scheme, params in URI_PARAMS.items()
            for name, values in params.items()
        )
    }


URI_HELP = _(
    "qemu:///system, qemu+ssh://[사용자@]호스트[:포트]/system, qemu+tls://호스트[:포트]/system"
    "(/session도 가능) 또는 test:///default, test:///절대/경로.xml. 쓸 수 있는 매개변수는 "
    "%(params)s뿐이며 command, socket, netcat, keyfile, no_verify 등 그 밖의 매개변수는 "
    "거부됩니다."
)


class GpuHost(models.Model):
    class State(models.TextChoices):
        ENABLED = "ENABLED", _("사용")
        DRAINING = "DRAINING", _("비우는 중")

    class DomainType(models.TextChoices):
        KVM = "kvm", "kvm"
        QEMU = "qemu", "qemu (TCG)"

    name = models.CharField(_("이름"), max_length=63, unique=True)
    zone = zone_reference(models.PROTECT, "gpu_hosts")
    uri = models.CharField(
        _("libvirt 접속 URI"),
        max_length=255,
        help_text=_("qemu:///system, qemu+ssh://…/system, qemu+tls://…/system 또는 test:///…"),
    )
    domain_type = models.CharField(
        _("도메인 유형"),
        max_length=8,
        choices=DomainType.choices,
        blank=True,
        help_text=_("비워 두면 LIBVIRT_DOMAIN_TYPE 설정을 따릅니다."),
    )
    state = models.CharField(_("상태"), max_length=10, choices=State.choices, default=State.ENABLED)
    fabric = models.CharField(_("패브릭 타입"), max_length=20, choices=FabricType.choices)
    block = models.CharField(_("블록"), max_length=40, blank=True)
    leaf = models.CharField(_("리프"), max_length=40, blank=True)
    rack = models.CharField(_("랙"), max_length=40, blank=True)
    storage_pool = models.CharField(_("스토리지 풀"), max_length=63, default="vc-pool")
    # Declared emulated slots, for a machine without GPUs: no hostdev is emitted for them.
    emulated_gpus = models.PositiveSmallIntegerField(_("에뮬레이트 GPU 수"), default=0)
    emulated_gpu_model = models.CharField(_("에뮬레이트 GPU 모델"), max_length=60, blank=True)
    emulated_vfs = models.PositiveSmallIntegerField(_("에뮬레이트 VF 수"), default=0)
    emulated_numa_nodes = models.PositiveSmallIntegerField(_("에뮬레이트 NUMA 노드 수"), default=1)
    # Host CPU ids per NUMA node ({"0": [0, 1, …]}), read from the capabilities at 동기화.
    cpus_by_node = models.JSONField(_("NUMA 노드별 CPU"), default=dict, blank=True)
    synced_at = models.DateTimeField(_("마지막 동기화"), null=True, blank=True)
    sync_error = models.CharField(_("동기화 오류"), max_length=500, blank=True)

    class Meta:
        db_table = "clusters_gpuhost"  # made by the clusters app
        ordering = ["zone", "block", "leaf", "name"]
        verbose_name = verbose_name_plural = _("GPU 호스트")

    def __str__(self):
        return self.name

    @property
    def emulated(self) -> bool:
        return self.emulated_gpus > 0

    def clean(self):
        """A libvirt URI the portal opens (``uri_refusal``); declared GPUs name their model."""
        refusal = uri_refusal(self.uri)
        if refusal is not None:
            raise ValidationError({"uri": refusal.message})
        if self.emulated_gpus and not self.emulated_gpu_model.strip():
            raise ValidationError(
                {"emulated_gpu_model": _("에뮬레이트 GPU가 있으면 모델을 입력하세요.")}
            )


class HostDevice(models.Model):
    """A GPU or a fabric VF of a host, and the placement holding it (none: free)."""

    class Kind(models.TextChoices):
        GPU = "GPU", "GPU"
        VF = "VF", "VF"

    host = models.ForeignKey(
        GpuHost, on_delete=models.CASCADE, related_name="devices", verbose_name=_("GPU 호스트")
    )
    kind = models.CharField(_("종류"), max_length=3, choices=Kind.choices)
    address = models.CharField(_("PCI 주소"), max_length=16)  # 0000:18:00.0; emu-N for slots
    vendor = models.CharField(_("벤더"), max_length=8, blank=True)
    model = models.CharField(_("모델"), max_length=100, blank=True)
    parent = models.CharField(_("부모 PF"), max_length=16, blank=True)
    numa_node = models.PositiveSmallIntegerField(_("NUMA 노드"), default=0)
    emulated = models.BooleanField(_("에뮬레이트"), default=False)
    # Gone from the host at the last 동기화 while placed: kept until its placement ends.
    missing = models.BooleanField(_("사라짐"), default=False)
    placement = models.ForeignKey(
        "Placement",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="devices",
        verbose_name=_("배치"),
    )

    class Meta:
        db_table = "clusters_hostdevice"  # made by the clusters app
        ordering = ["host", "kind", "address"]
        verbose_name = verbose_name_plural = _("호스트 장치")
        constraints = [
            models.UniqueConstraint(fields=["host", "address"], name="one_device_per_address")
        ]
        indexes = [models.Index(fields=["host", "placement"])]

    def __str__(self):
        return f"{self.host} {self.kind} {self.address}"


class Placement(models.Model):
    """A VM's place: its host (where its domain and disk live) and, while ``held``, the
    devices it was given. A row without a VM reserves a slot for a member about to join a
    running cluster."""

    host = models.ForeignKey(
        GpuHost, on_delete=models.PROTECT, related_name="placements", verbose_name=_("GPU 호스트")
    )
    vm = vm_reference(models.CASCADE, "placement", one_to_one=True, null=True, blank=True)
    cluster = cluster_reference(models.CASCADE, "+", null=True, blank=True)
    numa_node = models.PositiveSmallIntegerField(_("NUMA 노드"), null=True, blank=True)
    # Where the VM's domain and disk are now (moved to ``host`` at its next start).
    domain_host = models.ForeignKey(
        GpuHost,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        verbose_name=_("도메인 호스트"),
    )
    held = models.BooleanField(_("자원 보유"), default=True)
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)

    class Meta:
        db_table = "clusters_placement"  # made by the clusters app
        verbose_name = verbose_name_plural = _("배치")

    def __str__(self):
        return f"{self.vm or '-'} @ {self.host}"


class FabricPartition(models.Model):
    """A cluster's fabric partition: its InfiniBand PKey or RoCE VLAN and its address block
    (a /21 of 172.16.0.0/12, ``block``; unique among allocated clusters)."""

    cluster = cluster_reference(models.CASCADE, "fabric_partition", one_to_one=True)
    fabric = models.CharField(_("패브릭 타입"), max_length=20, choices=FabricType.choices)
    block = models.PositiveIntegerField(_("주소 블록"), unique=True)
    pkey = models.PositiveIntegerField(_("파티션 키(PKey)"), null=True, blank=True)
    vlan = models.PositiveIntegerField(_("VLAN 번호"), null=True, blank=True)
    configured = models.BooleanField(_("패브릭 구성됨"), default=False)
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)

    class Meta:
        db_table = "clusters_fabricpartition"  # made by the clusters app
        verbose_name = verbose_name_plural = _("패브릭 파티션")

    def __str__(self):
        return f"{self.cluster_id}: {self.pkey_hex or self.vlan}"

    @property
    def pkey_hex(self) -> str:
        return f"0x{self.pkey:04x}" if self.pkey is not None else ""
