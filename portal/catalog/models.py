"""The catalog: zones, instance types, and which fabrics each type offers where."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.models import reference_to


class FabricType(models.TextChoices):
    INFINIBAND = "INFINIBAND", "InfiniBand"
    ROCE_V2 = "ROCE_V2", "Ethernet (RoCEv2)"


class Zone(models.Model):
    code = models.SlugField(_("코드"), max_length=40, unique=True)
    name = models.CharField(_("이름"), max_length=100)

    class Meta:
        db_table = "vms_zone"  # made by the vms app, where the catalog began
        ordering = ["code"]
        verbose_name = verbose_name_plural = _("가용 영역")

    def __str__(self):
        return self.code


class InstanceType(models.Model):
    code = models.CharField(_("코드"), max_length=60, unique=True)
    gpu_model = models.CharField(_("GPU 모델"), max_length=60)
    gpu_count = models.PositiveSmallIntegerField(_("GPU 수"))
    gpu_memory_gib = models.PositiveIntegerField(_("GPU 메모리(GiB)"), default=80)
    vcpu = models.PositiveSmallIntegerField(_("vCPU 수"))
    memory_gib = models.PositiveIntegerField(_("메모리(GiB)"))
    zones: "models.ManyToManyField[Zone, FabricOffering]" = models.ManyToManyField(
        Zone, through="FabricOffering", related_name="instance_types"
    )

    class Meta:
        db_table = "vms_instancetype"  # made by the vms app, where the catalog began
        ordering = ["code"]
        verbose_name = verbose_name_plural = _("인스턴스 유형")

    def __str__(self):
        return self.code

    @property
    def summary(self):
        return f"{self.gpu_count}× {self.gpu_model} · {self.vcpu} vCPU · {self.memory_gib} GiB"


def one_per_fabric_of_type_in_zone(constraint_name):
    """One row per (zone, instance type, fabric): the catalog's offerings, and what the
    simulator can hold of each, are per fabric of an instance type in a zone."""
    return models.UniqueConstraint(fields=["zone", "instance_type", "fabric"], name=constraint_name)


# The links to the catalog, wherever they are made (a cluster, a VM, a GPU host, a threshold).
zone_reference = reference_to(Zone, _("가용 영역"))
instance_type_reference = reference_to(InstanceType, _("인스턴스 유형"))


class FabricOffering(models.Model):
    """Instance type X offers fabric F in zone Z (docs/rules.md#creating-a-cluster)."""

    zone = zone_reference(models.CASCADE, "offerings")
    instance_type = instance_type_reference(models.CASCADE, "offerings")
    fabric = models.CharField(_("패브릭 타입"), max_length=20, choices=FabricType.choices)

    class Meta:
        db_table = "vms_fabricoffering"  # made by the vms app, where the catalog began
        verbose_name = verbose_name_plural = _("패브릭 제공")
        constraints = [one_per_fabric_of_type_in_zone("one_offering_per_triple")]

    def __str__(self):
        return f"{self.instance_type} / {self.zone} / {self.get_fabric_display()}"
