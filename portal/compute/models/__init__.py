"""The compute app's models: the libvirt backend's GPU hosts, their devices, placements and
fabric partitions (``hosts``), the simulator's capacity and allocations (``simulator``).
Django finds them here; import them from ``portal.compute.models``."""

from portal.compute.models.hosts import (
    URI_SCHEMES,
    FabricPartition,
    GpuHost,
    HostDevice,
    Placement,
)
from portal.compute.models.simulator import SimulatorAllocation, SimulatorCapacity

__all__ = [
    "URI_SCHEMES",
    "FabricPartition",
    "GpuHost",
    "HostDevice",
    "Placement",
    "SimulatorAllocation",
    "SimulatorCapacity",
]
