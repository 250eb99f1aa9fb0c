"""Which tool runs on which member, in which phase.

Members are taken in node_rank order and joined in a ring. The phases keep the tools from
disturbing each other's figures: GPU diagnostics, then the intra-node all-reduce, then
``ib_write_bw`` round the ring (each member the client of the next, the server of the
previous), then the 2-node all-reduces in as many rounds as it takes for no member to be in
two at once, then the all-node all-reduce on rank 0. A phase is handed out once the one
before has finished (``clusters.validation.jobs.settle``).

A member without GPUs (``portal.compute.backends.base.GuestHardware``) has its GPU and
intra-node steps planned as skipped (``SKIPPED_NO_GPUS``: 건너뜀 — GPU 없음); with one such
member the cluster's all-reduce is the agent's MPI benchmark, one process per node over the
hostfile, run once on rank 0 (no NCCL, so no pairs). On a soft fabric ``ib_write_bw`` runs
over the one RDMA device the agent finds on the interface holding the member's fabric
address (``"device": "auto"``), with the RoCE v2 GID of that address.
"""

from typing import Any

from clusters.launch import member_address
from clusters.models.validation import ValidationJob
from portal.catalog.models import FabricType

PHASE_GPU, PHASE_LOCAL, PHASE_IB, PHASE_PAIRS, PHASE_ALL = 1, 2, 3, 4, 7
IB_BASE_PORT = 18515  # perftest's default TCP port; one more per NIC
IB_MESSAGE_BYTES = 1 << 20
IB_SECONDS = 5
# A soft fabric between TCG guests carries about 1 MB/s under load: 1 MB messages over
# perftest's measured window (its duration less a margin each side) count 0 to 5 of them, a
# figure that is mostly rounding. 64 KB messages over 8 s count a hundred or more.
SOFT_IB_MESSAGE_BYTES = 1 << 16
SOFT_IB_SECONDS = 8
NCCL_ARGS = ["-b", "512M", "-e", "8G", "-f", "2"]  # large messages: the thresholds' range
# The agent's MPI all-reduce (``metrics/vm_agent/allreduce.py``): sizes a soft fabric carries
# in a few seconds each.
MPI_ARGS = ["-b", "1M", "-e", "4M", "-f", "4", "-n", "5", "-w", "1"]
ROCE_GID_INDEX = 3  # a RoCE v2 IPv4 GID's usual index on an HCA (mlx5)
SKIPPED_NO_GPUS = "no_gpus"  # a job's ``figures["skipped"]``: planned as skipped, GPU 없음
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


def _skipped(job):
    job.status, job.figures = ValidationJob.Status.SKIPPED, {"skipped": SKIPPED_NO_GPUS}
    return job


def _node_jobs(run, vm, gpus, env):
    """The member's GPU diagnostics and intra-node all-reduce (skipped without GPUs)."""
    found = [
        _job(run, vm, ValidationJob.Kind.GPU, PHASE_GPU, {"level": run.level}, level=run.level),
        _job(
            run,
            vm,
            ValidationJob.Kind.NCCL_LOCAL,
            PHASE_LOCAL,
            {"gpus": gpus, "args": NCCL_ARGS, "env": env},
        ),
    ]
    return [_skipped(job) for job in found] if gpus == 0 else found


def ib_phase(pair: int, soft: bool) -> int:
    """The phase of the ring's pair ``pair`` (member ``pair`` → the next): all at once on
    HCAs, whose ports send and receive at full rate together; one pair after another on a
    soft fabric, whose members share the host's CPUs, so a pair's figure is its own link's."""
    return PHASE_IB + pair if soft else PHASE_IB


def _ib_jobs(run, members, ib, soft):
    jobs = []
    count = len(members)
    for i, vm in enumerate(members):
        server, client = members[(i + 1) % count], members[i - 1]
        mine = {**ib, "device": "auto", "address": member_address(vm)} if soft else ib
        target = member_address(server) if soft else server.private_ip
        serving = ib_phase((i - 1) % count, soft)  # the pair whose server this member is
        jobs.append(_job(run, vm, ValidationJob.Kind.IB_SERVER, serving, mine, peers=[client]))
        jobs.append(
            _job(
                run,
                vm,
                ValidationJob.Kind.IB_CLIENT,
                ib_phase(i, soft),
                {**mine, "server": target},
                [server],
            )
        )
    return jobs


def _nccl_jobs(run, members, gpus, env):
    jobs = []
    count = len(members)
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


def _mpi_job(run, members, phase):
    params = {
        "runner": "mpi",
        "nodes": len(members),
        "address": member_address(members[0]),
        "args": MPI_ARGS,
    }
    return _job(run, members[0], ValidationJob.Kind.NCCL_ALL, phase, params, members[1:])


def ring_neighbours(members: list, focus_id: int) -> list:
    """``focus_id``'s member and its neighbours round the ring of ``members`` (node_rank
    order), in that order: what a targeted 검증 runs on (two members: both)."""
    ids = [vm.pk for vm in members]
    if focus_id not in ids:
        return []
    i, count = ids.index(focus_id), len(members)
    around = {(i - 1) % count, i, (i + 1) % count}
    return [vm for index, vm in enumerate(members) if index in around]


LINKS = (ValidationJob.Kind.IB_CLIENT, ValidationJob.Kind.IB_SERVER, ValidationJob.Kind.NCCL_PAIR)


def _about(job: ValidationJob, focus_id: int) -> bool:
    """A targeted run keeps the focus's own checks and the links of its small ring: the
    neighbours' link to each other stays, as the reference that tells whose side a slow link
    is on (a neighbour with one low link and no other would take the blame)."""
    return job.vm_id == focus_id or job.kind in LINKS


def plan_jobs(run, cluster, members, hardware=None, focus=None) -> list[ValidationJob]:
    """The run's jobs for ``members`` (running, in node_rank order), not saved;
    ``hardware`` (``{vm id: GuestHardware}``, the backend's word) says which have GPUs and
    a soft fabric (none named: the instance type's GPUs on a real fabric). With ``focus``
    (a member's id; ``members`` its ring neighbours and itself) only that member's own
    checks and the links round that small ring are planned: no all-node all-reduce."""
    if focus is not None:
        planned = _plan(run, cluster, members, hardware)
        return [
            job for job in planned if _about(job, focus) and job.kind != ValidationJob.Kind.NCCL_ALL
        ]
    return _plan(run, cluster, members, hardware)


def _plan(run, cluster, members, hardware=None) -> list[ValidationJob]:
    thresholds = run.thresholds
    gpus = cluster.instance_type.gpu_count
    given = {vm.pk: gpus for vm in members}
    given.update({pk: h.gpus for pk, h in (hardware or {}).items() if pk in given})
    soft = any(h.soft_fabric for pk, h in (hardware or {}).items() if pk in given)
    env = NCCL_FABRIC_ENV[cluster.fabric_type]
    roce = cluster.fabric_type == FabricType.ROCE_V2
    ib = {
        "ports": thresholds["ports"],
        "base_port": IB_BASE_PORT,
        "bytes": SOFT_IB_MESSAGE_BYTES if soft else IB_MESSAGE_BYTES,
        "seconds": SOFT_IB_SECONDS if soft else IB_SECONDS,
        # A soft fabric's agent finds the RoCE v2 GID of its own fabric address.
        "gid_index": ROCE_GID_INDEX if roce and not soft else None,
    }
    jobs = [job for vm in members for job in _node_jobs(run, vm, given[vm.pk], env)]
    jobs += _ib_jobs(run, members, ib, soft)
    if all(given.values()):
        return jobs + _nccl_jobs(run, members, gpus, env)
    # After the ring's last pair (one phase each on a soft fabric).
    phase = max(PHASE_ALL, ib_phase(len(members), soft))
    return jobs + [_mpi_job(run, members, phase)]
