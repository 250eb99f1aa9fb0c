"""GPU hosts of the libvirt backend, their inventory, what is placed on them, and each
cluster's fabric partition.

A host is one libvirtd (``uri``). Its inventory (GPUs and fabric virtual functions, each with
its NUMA node) is read from the host's node devices by
``portal.compute.backends.libvirt.inventory``;
a host without such devices may instead *declare* emulated GPU and VF slots. A ``Placement``
binds a VM to a host and holds the devices it was given; capacity is the inventory minus
what placements hold.
"""

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from vms.models import FabricType, cluster_reference, vm_reference, zone_reference

# qemu: a local or remote libvirtd (ssh, tls); test: libvirt's test driver (tests, benches).
URI_SCHEMES = ("qemu", "qemu+ssh", "qemu+tls", "test")


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
        ordering = ["zone", "block", "leaf", "name"]
        verbose_name = verbose_name_plural = _("GPU 호스트")

    def __str__(self):
        return self.name

    @property
    def emulated(self) -> bool:
        return self.emulated_gpus > 0

    def clean(self):
        """A libvirt URI of a driver the backend speaks; declared GPUs name their model."""
        if self.uri.split(":", 1)[0] not in URI_SCHEMES:
            raise ValidationError(
                {
                    "uri": _("libvirt URI는 %(schemes)s 중 하나로 시작해야 합니다.")
                    % {"schemes": ", ".join(f"{s}://" for s in URI_SCHEMES)}
                }
            )
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
        verbose_name = verbose_name_plural = _("패브릭 파티션")

    def __str__(self):
        return f"{self.cluster_id}: {self.pkey_hex or self.vlan}"

    @property
    def pkey_hex(self) -> str:
        return f"0x{self.pkey:04x}" if self.pkey is not None else ""
