"""The default backend: a simulated GPU cloud on one machine (SPEC §8).

Capacity lives in ``SimulatorCapacity`` rows (nodes per zone × type × fabric, set in the
admin or by ``seed_demo``) and allocations in ``SimulatorAllocation``, so every process
(web, workers, reconciler) sees the same ledger. Each step takes
``settings.SIMULATOR_STEP_SECONDS``. Tests inject faults through ``SimulatorBackend.faults``.
"""

import itertools
import time

from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from clusters.backends.base import Capacity, ComputeBackend, FabricAddress
from clusters.models import SimulatorAllocation, SimulatorCapacity
from portal.errors import BackendError, CapacityUnavailable
from vms.models import FabricType

DEFAULT_NODES = 64


class SimulatorBackend(ComputeBackend):
    emits_metrics = True  # simulated VMs run no agent: metrics.simulate writes their samples
    # {method name: exception instance or callable} raised once at the next call (tests).
    faults = {}

    def _step(self, name):
        fault = self.faults.pop(name, None)
        if fault is not None:
            raise fault() if callable(fault) else fault
        if settings.SIMULATOR_STEP_SECONDS:
            time.sleep(settings.SIMULATOR_STEP_SECONDS)

    def _capacity_row(self, zone_id, instance_type_id, fabric, lock=False):
        rows = SimulatorCapacity.objects.select_for_update() if lock else SimulatorCapacity.objects
        row = rows.filter(zone_id=zone_id, instance_type_id=instance_type_id, fabric=fabric).first()
        if row is None:
            row, _created = SimulatorCapacity.objects.get_or_create(
                zone_id=zone_id,
                instance_type_id=instance_type_id,
                fabric=fabric,
                defaults={"total_nodes": DEFAULT_NODES},
            )
        return row

    def capacity(self, zone, instance_type, fabric):
        row = self._capacity_row(zone.pk, instance_type.pk, fabric)
        used = SimulatorAllocation.objects.filter(capacity=row).aggregate(n=Sum("nodes"))["n"] or 0
        return Capacity(total_nodes=row.total_nodes, free_nodes=max(row.total_nodes - used, 0))

    def create_vm(self, vm):
        # Deterministic per VM: 10.<zone>.<hi>.<lo>, never .0/.1/.255.
        return f"10.{vm.zone_id % 256}.{(vm.pk // 250) % 256}.{vm.pk % 250 + 2}"

    def register_cluster(self, cluster):
        self._step("register_cluster")

    def allocate(self, cluster, nodes):
        self._step("allocate")
        with transaction.atomic():
            # The capacity row's lock serialises allocations of the same pool.
            row = self._capacity_row(
                cluster.zone_id, cluster.instance_type_id, cluster.fabric_type, lock=True
            )
            used = (
                SimulatorAllocation.objects.filter(capacity=row)
                .exclude(cluster_id=cluster.pk)
                .aggregate(n=Sum("nodes"))["n"]
                or 0
            )
            if used + nodes > row.total_nodes:
                raise CapacityUnavailable()
            SimulatorAllocation.objects.update_or_create(
                cluster_id=cluster.pk, defaults={"capacity": row, "nodes": nodes}
            )

    def configure_fabric(self, cluster, members):
        self._step("configure_fabric")
        if not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).update(configured=True):
            raise BackendError()
        return {vm.pk: self.fabric_address(cluster, vm, index) for index, vm in enumerate(members)}

    def fabric_address(self, cluster, vm, index):
        if cluster.fabric_type == FabricType.INFINIBAND:
            return FabricAddress(guid=f"0x248a0703{vm.pk:08x}", lid=index + 1)
        return FabricAddress(
            ip=f"172.{16 + (cluster.pk // 256) % 16}.{cluster.pk % 256}.{index + 10}", gid_index=3
        )

    def release(self, cluster):
        SimulatorAllocation.objects.filter(cluster_id=cluster.pk).delete()

    def allocated_cluster_ids(self):
        return list(SimulatorAllocation.objects.values_list("cluster_id", flat=True))

    def start_vm(self, vm, cluster=None):
        self._step("start_vm")
        if cluster is None:
            return None
        if vm.fabric_guid or vm.fabric_ip:  # joined when the cluster started: keep it
            return FabricAddress(vm.fabric_guid, vm.fabric_lid, vm.fabric_ip, vm.fabric_gid_index)
        others = cluster.members.exclude(pk=vm.pk)
        used = {lid - 1 for lid in others.values_list("fabric_lid", flat=True) if lid}
        used |= {
            int(ip.rsplit(".", 1)[1]) - 10
            for ip in others.values_list("fabric_ip", flat=True)
            if ip
        }
        index = next(i for i in itertools.count() if i not in used)
        return self.fabric_address(cluster, vm, index)

    def stop_vm(self, vm):
        self._step("stop_vm")
