"""What the portal asks of the infrastructure. A real backend implements the same methods."""

from dataclasses import dataclass


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


class ComputeBackend:
    """Every method is idempotent: a retried task or the reconciler may call it twice.

    Errors are ``portal.errors.CapacityUnavailable`` (no room) or ``BackendError``.
    """

    # True when the backend's VMs run no metrics agent and the portal writes their samples
    # itself (``metrics.tasks.emit_simulated_samples``); a real cloud's VMs report their own.
    emits_metrics = False

    def capacity(self, zone, instance_type, fabric) -> Capacity:
        raise NotImplementedError

    def create_vm(self, vm) -> str:
        """Provision ``vm``; return its private IP."""
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
