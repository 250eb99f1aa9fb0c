"""The simulator backend's fabric: how many nodes each (zone, instance type, fabric) can
hold, and what each cluster holds of it."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.catalog.models import (
    FabricType,
    instance_type_reference,
    one_per_fabric_of_type_in_zone,
    zone_reference,
)
from vms.models import cluster_reference


class SimulatorCapacity(models.Model):
    """How many nodes the simulated fabric of (zone, type, fabric) can hold."""

    zone = zone_reference(models.CASCADE)
    instance_type = instance_type_reference(models.CASCADE)
    fabric = models.CharField(_("패브릭 타입"), max_length=20, choices=FabricType.choices)
    total_nodes = models.PositiveIntegerField(_("전체 노드 수"), default=64)

    class Meta:
        db_table = "clusters_simulatorcapacity"  # made by the clusters app
        verbose_name = verbose_name_plural = _("시뮬레이터 용량")
        constraints = [one_per_fabric_of_type_in_zone("one_capacity_per_triple")]

    def __str__(self):
        return (
            f"{self.zone} / {self.instance_type} / {self.get_fabric_display()}: {self.total_nodes}"
        )


class SimulatorAllocation(models.Model):
    """Nodes the simulator has reserved for one cluster's fabric."""

    cluster = cluster_reference(models.CASCADE, "+", one_to_one=True)
    capacity = models.ForeignKey(
        SimulatorCapacity, on_delete=models.CASCADE, verbose_name=_("시뮬레이터 용량")
    )
    nodes = models.PositiveIntegerField(_("노드 수"))
    configured = models.BooleanField(_("패브릭 구성됨"), default=False)
    created_at = models.DateTimeField(_("생성일"), auto_now_add=True)

    class Meta:
        db_table = "clusters_simulatorallocation"  # made by the clusters app
        verbose_name = verbose_name_plural = _("시뮬레이터 할당")

    def __str__(self):
        return _("클러스터 %(cluster)s: 노드 %(nodes)d개") % {
            "cluster": self.cluster_id,
            "nodes": self.nodes,
        }
