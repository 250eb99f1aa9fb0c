"""What the portal asks of the infrastructure. A real backend implements the same methods."""

import re
from dataclasses import dataclass, field

from portal.catalog.models import FabricOffering
from portal.foundation.errors import CapacityUnavailable

# The fabric as the capacity error names it (a proper noun: the same in every language).
FABRIC_SHORT = {"INFINIBAND": "InfiniBand", "ROCE_V2": "RoCEv2"}


@dataclass(frozen=True)
class Capacity:
    total_nodes: int
    free_nodes: int


@dataclass(frozen=True)
class FabricAddress:
    """InfiniBand: port GUID + LID. RoCEv2: fabric IP + GID index."""

    guid: str = ""
    lid: int | None = None
    ip: str | None = None
    gid_index: int | None = None


@dataclass(frozen=True)
class Observed:
    """What the backend sees of one VM: running or not, and if not, why (``reason`` is a
    notice code of ``portal.foundation.event_text``: the guest shut down, crashed, was
    destroyed, or its domain is gone)."""

    running: bool
    reason: str = ""


@dataclass
class Observation:
    """Every VM the backend sees (by VM id), and what it runs that no live VM owns (by name:
    reported, never destroyed)."""

    vms: dict[int, Observed] = field(default_factory=dict)
    strays: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GuestHardware:
    """What a guest was given: its GPUs (0 for a guest on declared slots, which gets no GPU
    hostdev) and whether its fabric is soft (an emulated network carrying a software RDMA
    device such as Soft-RoCE, not a VF of a real HCA)."""

    gpus: int
    soft_fabric: bool = False


def guest_hostname(vm) -> str:
    """The VM's name as its guest's hostname (RFC 1123: lower-case ASCII letters, digits,
    hyphens), or ``vm-<id>`` when nothing of the name is left: what its seed sets and what its
    cluster's members call it (``clusters.peers``)."""
    name = re.sub(r"[^a-z0-9]+", "-", vm.name.lower()).strip("-")[:63].strip("-")
    return name or f"vm-{vm.pk}"


def private_ip(vm) -> str:
    """Deterministic per VM: 10.<zone>.<hi>.<lo>, never .0/.1/.255."""
    return f"10.{vm.zone_id % 256}.{(vm.pk // 250) % 256}.{vm.pk % 250 + 2}"


class ComputeBackend:
    """Every method is idempotent: a retried task or the reconciler may call it twice.

    Errors are ``portal.foundation.errors.CapacityUnavailable`` (no room) or ``BackendError``.
    """

    # True when the backend's VMs run no metrics agent and the portal writes their samples
    # itself (``metrics.tasks.emit_simulated_samples``); a real cloud's VMs report their own.
    emits_metrics = False

    def guest_hardware(self, vms, gpus: int | None = None) -> dict[int, GuestHardware]:
        """{VM id: what the backend gave the guest}: by default its instance type's GPUs on
        a real fabric (``gpus``: the type's, when the caller knows them — a cluster's members
        share its type). 클러스터 검증 plans and judges by it (``clusters.validation.plan``)."""
        return {
            vm.pk: GuestHardware(gpus=vm.instance_type.gpu_count if gpus is None else gpus)
            for vm in vms
        }

    def soft_fabric(self, vm_ids) -> bool:
        """Whether any of these VMs' fabric is soft (``GuestHardware.soft_fabric``), in one
        question: the console says so beside the fabric type. No backend but libvirt on
        declared slots gives one."""
        return False

    def shortage(self, zone, instance_type, fabric, requested: int, available: int):
        """The capacity error naming what is short ("kr-central-1a의 L40S · RoCEv2: 요청 2노드,
        가용 1노드") and the other zones offering the same type and fabric that have room for
        ``requested`` nodes now (asked of ``capacity``; none when no zone has)."""
        others = (
            FabricOffering.objects.filter(instance_type=instance_type, fabric=fabric)
            .exclude(zone=zone)
            .select_related("zone")
            .order_by("zone__code")
        )
        room = []
        for offering in others:
            free = self.capacity(offering.zone, instance_type, fabric).free_nodes
            if free >= requested:
                room.append([offering.zone.code, free])
        return CapacityUnavailable(
            zone=zone.code,
            instance_type=instance_type.gpu_model,
            fabric=FABRIC_SHORT.get(fabric, fabric),
            requested=requested,
            available=available,
            room=room,
        )

    def capacity(self, zone, instance_type, fabric) -> Capacity:
        raise NotImplementedError

    def create_vm(self, vm) -> str:
        """Provision ``vm``; return its private IP."""
        raise NotImplementedError

    def delete_vm(self, vm) -> None:
        """Remove everything ``vm`` had (domain, disk, addresses); nothing may leak."""
        raise NotImplementedError

    def register_cluster(self, cluster) -> None:
        """Prepare an empty cluster (its fabric partition, its records) after create."""
        raise NotImplementedError

    def allocate(self, cluster, nodes: int) -> None:
        """Reserve fabric capacity for ``nodes`` members of ``cluster``."""
        raise NotImplementedError

    def configure_fabric(self, cluster, members) -> dict[int, FabricAddress]:
        """Join ``members`` to the cluster's fabric; return their addresses by VM id."""
        raise NotImplementedError

    def leave_cluster(self, vm, cluster) -> None:
        """``vm`` (stopped) left ``cluster``: it gives back its fabric devices and node."""
        raise NotImplementedError

    def release(self, cluster) -> None:
        """Give back everything allocated for ``cluster`` (no-op if nothing is)."""
        raise NotImplementedError

    def allocated_cluster_ids(self) -> list[int]:
        """Clusters holding fabric capacity now (the reconciler frees those that should not)."""
        raise NotImplementedError

    def start_vm(self, vm, cluster=None) -> FabricAddress | None:
        """Power ``vm`` on; for a member of a running cluster, return its fabric address."""
        raise NotImplementedError

    def stop_vm(self, vm) -> None:
        raise NotImplementedError

    def observe(self) -> Observation:
        """The observed state of the VMs (the reconciler repairs the portal's from it)."""
        raise NotImplementedError
