"""Which tool runs on which member, in which phase.

Members are taken in node_rank order and joined in a ring. The phases keep the tools from
disturbing each other's figures: GPU diagnostics, then the intra-node all-reduce, then
``ib_write_bw`` round the ring (each member the client of the next, the server of the
previous), then the 2-node all-reduces in as many rounds as it takes for no member to be in
two at once, then the all-node all-reduce on rank 0. A phase is handed out once the one
before has finished (``clusters.validation.jobs.settle``).
"""

from typing import Any

from clusters.models.validation import ValidationJob
from portal.catalog.models import FabricType

PHASE_GPU, PHASE_LOCAL, PHASE_IB, PHASE_PAIRS, PHASE_ALL = 1, 2, 3, 4, 7
IB_BASE_PORT = 18515  # perftest's default TCP port; one more per NIC
IB_MESSAGE_BYTES = 1 << 20
IB_SECONDS = 5
NCCL_ARGS = ["-b", "512M", "-e", "8G", "-f", "2"]  # large messages: the thresholds' range
# How long the agent may run each tool (it kills it then and reports the timeout).
TIMEOUTS: dict[str, Any] = {
    ValidationJob.Kind.GPU: {1: 120, 2: 600},
    ValidationJob.Kind.NCCL_LOCAL: 300,
    ValidationJob.Kind.IB_SERVER: 180,
    ValidationJob.Kind.IB_CLIENT: 180,
    ValidationJob.Kind.NCCL_PAIR: 300,
    ValidationJob.Kind.NCCL_ALL: 600,
}
# What NCCL needs to take the fabric (the 정보 tab shows users the same variables).
NCCL_FABRIC_ENV = {
    FabricType.INFINIBAND: {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5"},
    FabricType.ROCE_V2: {
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_HCA": "mlx5",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
    },
}


def ring_pairs(count: int) -> list[tuple[int, int, int]]:
    """``(a, b, phase)`` for each neighbouring pair of a ring of ``count`` members, phased so
    that no member is in two pairs of one phase (an odd ring needs a third round)."""
    if count < 2:
        return []
    if count == 2:
        return [(0, 1, PHASE_PAIRS)]
    pairs = []
    for i in range(count):
        phase = PHASE_PAIRS + i % 2
        if count % 2 and i == count - 1:
            phase = PHASE_PAIRS + 2
        pairs.append((i, (i + 1) % count, phase))
    return pairs


def _job(run, vm, kind, phase, params, peers=(), level=1):
    timeout = TIMEOUTS[kind][level] if kind == ValidationJob.Kind.GPU else TIMEOUTS[kind]
    return ValidationJob(
        run=run,
        vm=vm,
        vm_name=vm.name,
        kind=kind,
        phase=phase,
        params=params,
        peers=[p.pk for p in peers],
        timeout_seconds=timeout,
    )


def plan_jobs(run, cluster, members) -> list[ValidationJob]:
    """The run's jobs for ``members`` (running, in node_rank order), not saved."""
    thresholds = run.thresholds
    gpus = cluster.instance_type.gpu_count
    env = NCCL_FABRIC_ENV[cluster.fabric_type]
    roce = cluster.fabric_type == FabricType.ROCE_V2
    ib = {
        "ports": thresholds["ports"],
        "base_port": IB_BASE_PORT,
        "bytes": IB_MESSAGE_BYTES,
        "seconds": IB_SECONDS,
        "gid_index": 3 if roce else None,
    }
    jobs = []
    for vm in members:
        jobs.append(
            _job(run, vm, ValidationJob.Kind.GPU, PHASE_GPU, {"level": run.level}, level=run.level)
        )
        jobs.append(
            _job(
                run,
                vm,
                ValidationJob.Kind.NCCL_LOCAL,
                PHASE_LOCAL,
                {"gpus": gpus, "args": NCCL_ARGS, "env": env},
            )
        )
    count = len(members)
    for i, vm in enumerate(members):
        server, client = members[(i + 1) % count], members[i - 1]
        jobs.append(_job(run, vm, ValidationJob.Kind.IB_SERVER, PHASE_IB, ib, peers=[client]))
        jobs.append(
            _job(
                run,
                vm,
                ValidationJob.Kind.IB_CLIENT,
                PHASE_IB,
                {**ib, "server": server.private_ip},
                [server],
            )
        )
    for a, b, phase in ring_pairs(count):
        hosts = [members[a].private_ip, members[b].private_ip]
        params = {"hosts": hosts, "gpus": gpus, "args": NCCL_ARGS, "env": env}
        jobs.append(
            _job(run, members[a], ValidationJob.Kind.NCCL_PAIR, phase, params, [members[b]])
        )
    if count > 2:
        params = {
            "hosts": [vm.private_ip for vm in members],
            "gpus": gpus,
            "args": NCCL_ARGS,
            "env": env,
        }
        jobs.append(
            _job(run, members[0], ValidationJob.Kind.NCCL_ALL, PHASE_ALL, params, members[1:])
        )
    return jobs
