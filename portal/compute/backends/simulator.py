"""The default backend: a simulated GPU cloud on one machine
(docs/architecture.md#compute-backends).

Capacity lives in ``SimulatorCapacity`` rows (nodes per zone × type × fabric, set in the
admin or by ``seed_demo``) and allocations in ``SimulatorAllocation``, so every process
(web, workers, reconciler) sees the same ledger. Each step takes
``settings.SIMULATOR_STEP_SECONDS``. Tests inject faults through ``SimulatorBackend.faults``
and, across processes (a worker, beat), hold steps at a ``StepGate``.
"""

import ipaddress
import itertools
import os
import time
from pathlib import Path
from typing import Any, ClassVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum

from clusters.models import VirtualCluster
from portal.catalog.models import FabricType
from portal.compute.backends.base import (
    Capacity,
    ComputeBackend,
    FabricAddress,
    GuestHardware,
    Observation,
    Observed,
    private_ip,
)
from portal.compute.models import SimulatorAllocation, SimulatorCapacity
from portal.foundation.errors import BackendError, CapacityUnavailable
from vms.models import VirtualMachine, VmStatus

DEFAULT_NODES = 64

# RoCE: a cluster holding fabric owns one /21 of 172.16.0.0/12 (512 blocks of 2,048
# addresses); member ``i`` is host ``10 + i`` of it, so a cluster has up to 2,037 members
# (the last address is the broadcast) and two allocated clusters never share an address.
# The block is kept in the allocation row's primary key, ``-1 - block``: the key makes it
# unique without a column of its own, deleting the row (release) frees it, and ordinary
# (InfiniBand) rows take positive keys from the sequence, so they never take a block.
ROCE_NETWORK = ipaddress.ip_network("172.16.0.0/12")
ROCE_BLOCK_PREFIX = 21
ROCE_BLOCK_SIZE = 2 ** (32 - ROCE_BLOCK_PREFIX)
ROCE_BLOCKS = ROCE_NETWORK.num_addresses // ROCE_BLOCK_SIZE
ROCE_FIRST_HOST = 10
ROCE_MAX_MEMBERS = ROCE_BLOCK_SIZE - ROCE_FIRST_HOST - 1


class StepGate:
    """A folder (``settings.SIMULATOR_STEP_GATE``) through which a test sees and holds the
    simulator's steps in any process: each step, as it starts, writes
    ``started-<step>-<pid>-<n>``, then waits while the folder holds ``closed`` (every step)
    or ``closed-<step>`` (at most ``HOLD_SECONDS``, so a forgotten gate cannot wedge a
    process for good). A test then acts "mid-step" by state (a marker is there, the step is
    held) instead of by a sleep."""

    HOLD_SECONDS = 600
    _count = itertools.count()

    def __init__(self, folder):
        self.folder = Path(folder)

    def close(self, step: str = "") -> None:
        """Hold every step (or only ``step``) from now on."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / (f"closed-{step}" if step else "closed")).touch()

    def open(self) -> None:
        for path in self.folder.glob("closed*"):
            path.unlink(missing_ok=True)

    def started(self, step: str = "") -> list[str]:
        """The markers of the steps started so far (of ``step`` only, if given)."""
        prefix = f"started-{step}-" if step else "started-"
        return sorted(path.name for path in self.folder.glob(f"{prefix}*"))

    def pass_through(self, step: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"started-{step}-{os.getpid()}-{next(self._count)}").touch()
        deadline = time.monotonic() + self.HOLD_SECONDS
        holds = (self.folder / "closed", self.folder / f"closed-{step}")
        while any(hold.exists() for hold in holds) and time.monotonic() < deadline:
            time.sleep(0.02)


class SimulatorBackend(ComputeBackend):
    emits_metrics = True  # simulated VMs run no agent: metrics.simulate writes their samples
    # {method name: exception instance or callable} raised once at the next call (tests).
    faults: ClassVar[dict[str, Any]] = {}
    # {method name: callable} called once at the next call, before it does anything: what
    # happens elsewhere while a step is in flight (tests decide races by it, not by timing).
    hooks: ClassVar[dict[str, Any]] = {}
    # Names of VMs that play guests on declared slots: no GPU, a soft fabric (tests; the
    # simulator's agents answer their 검증 jobs as such guests would).
    declared_slots: ClassVar[set[str]] = set()

    def guest_hardware(self, vms, gpus=None):
        given = super().guest_hardware(vms, gpus)
        for vm in vms:
            if vm.name in self.declared_slots:
                given[vm.pk] = GuestHardware(gpus=0, soft_fabric=True)
        return given

    def _step(self, name):
        hook = self.hooks.pop(name, None)
        if hook is not None:
            hook()
        fault = self.faults.pop(name, None)
        if fault is not None:
            raise fault() if callable(fault) else fault
        if settings.SIMULATOR_STEP_GATE:
            StepGate(settings.SIMULATOR_STEP_GATE).pass_through(name)
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
        return private_ip(vm)

    def delete_vm(self, vm):
        """A simulated VM holds nothing outside its row."""

    def register_cluster(self, cluster):
        self._step("register_cluster")

    def allocate(self, cluster, nodes):
        self._step("allocate")
        roce = cluster.fabric_type == FabricType.ROCE_V2
        if roce and nodes > ROCE_MAX_MEMBERS:
            raise CapacityUnavailable()
        with transaction.atomic():
            # Lock order: cluster before pool. The allocation row refers to the cluster, and
            # PostgreSQL checks that (deferred) foreign key at commit, taking a share lock on
            # the cluster row while this transaction still holds the pool: a step holding the
            # pool then waited for an attach holding the cluster, which waited for a VM whose
            # attach waited for the pool (a deadlock seen in the concurrency storm).
            VirtualCluster.objects.select_for_update().filter(pk=cluster.pk).exists()
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
                free = max(row.total_nodes - used, 0)
                raise self.shortage(
                    cluster.zone, cluster.instance_type, cluster.fabric_type, nodes, free
                )
            held = SimulatorAllocation.objects.filter(cluster_id=cluster.pk)
            if roce:
                held.filter(pk__gte=0).delete()  # allocated before blocks: given one below
            if not held.update(capacity=row, nodes=nodes):
                self._new_allocation(cluster, row, nodes, roce)

    def _new_allocation(self, cluster, row, nodes, roce):
        """Insert the row; a RoCE row under the lowest free block's key. Another pool's
        allocation (not serialised by this pool's lock) may take that block first: the
        insert then fails on the key and the next free block is tried."""
        if not roce:
            SimulatorAllocation.objects.create(cluster_id=cluster.pk, capacity=row, nodes=nodes)
            return
        while True:
            taken = set(SimulatorAllocation.objects.filter(pk__lt=0).values_list("pk", flat=True))
            key = next((-1 - b for b in range(ROCE_BLOCKS) if -1 - b not in taken), None)
            if key is None:
                raise CapacityUnavailable()
            try:
                with transaction.atomic():
                    SimulatorAllocation.objects.create(
                        pk=key, cluster_id=cluster.pk, capacity=row, nodes=nodes
                    )
                return
            except IntegrityError:
                if not SimulatorAllocation.objects.filter(pk=key).exists():
                    raise  # not a block taken meanwhile: a real error

    def configure_fabric(self, cluster, members):
        self._step("configure_fabric")
        if not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).update(configured=True):
            raise BackendError()
        first = self._first_roce_host(cluster)
        return {
            vm.pk: self.fabric_address(cluster, vm, index, first)
            for index, vm in enumerate(members)
        }

    @staticmethod
    def _first_roce_host(cluster):
        """Member 0's address in the block of a RoCE cluster's allocation (None: InfiniBand)."""
        if cluster.fabric_type != FabricType.ROCE_V2:
            return None
        key = (
            SimulatorAllocation.objects.filter(cluster_id=cluster.pk, pk__lt=0)
            .values_list("pk", flat=True)
            .first()
        )
        if key is None:  # released meanwhile
            raise BackendError()
        block = -1 - key
        return ROCE_NETWORK.network_address + block * ROCE_BLOCK_SIZE + ROCE_FIRST_HOST

    def fabric_address(self, cluster, vm, index, first_roce_host):
        if first_roce_host is None:
            return FabricAddress(guid=f"0x248a0703{vm.pk:08x}", lid=index + 1)
        return FabricAddress(ip=str(first_roce_host + index), gid_index=3)

    def leave_cluster(self, vm, cluster):
        """The cluster's allocation counts nodes, not VMs: nothing is bound to ``vm``."""

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
        first = self._first_roce_host(cluster)
        used = {lid - 1 for lid in others.values_list("fabric_lid", flat=True) if lid}
        used |= {
            int(ipaddress.ip_address(ip)) - int(first)
            for ip in others.values_list("fabric_ip", flat=True)
            if ip
        }
        index = next(i for i in itertools.count() if i not in used)
        return self.fabric_address(cluster, vm, index, first)

    def stop_vm(self, vm):
        self._step("stop_vm")

    def observe(self):
        """Simulated VMs run exactly as the portal says: running ones are seen running."""
        running = VirtualMachine.objects.filter(status=VmStatus.RUNNING)
        return Observation(vms={pk: Observed(True) for pk in running.values_list("pk", flat=True)})
