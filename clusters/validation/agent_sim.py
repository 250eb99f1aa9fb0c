"""The simulator's agents for 클러스터 검증 (docs/architecture.md#compute-backends).

Simulated VMs run no agent, so ``answer_jobs`` plays one for every running member: it
claims the member's jobs through the same ``claim`` the agents' endpoint uses and posts
output printed in the tools' own formats through the same ``record``, so the portal parses
and judges it exactly as it would real output. Figures are those of healthy 8 × H100 nodes
on 400 Gb/s ports (a few percent above the published thresholds, with jitter), and the
durations those the tools take (``dcgmi diag -r 1`` seconds, ``-r 2`` about two minutes);
each phase takes ``SIMULATOR_STEP_SECONDS`` of wall time.

The demo's straggler, ``gpu-node-03`` (``STRAGGLERS``), has a bad rail: GPU 5's port,
mlx5_5, trains at a fraction of its rate and gathers symbol errors, so its ``ib_write_bw``
and every all-reduce it takes part in fall far below the thresholds.

Members the simulator plays as guests on declared slots
(``SimulatorBackend.declared_slots``: no GPU, Soft-RoCE) answer as such guests do: one
``rxe0`` at a few Gb/s, and rank 0 the agent's MPI all-reduce (``metrics/vm_agent/allreduce.py``'s
own report). ``SOFT_SLOWDOWN`` makes a member's soft pairs and all-reduce slower (tests: a
fabric that degraded since its baseline).
"""

import json
import random
import time
from typing import Any

from django.conf import settings

from clusters.models.validation import ValidationJob, ValidationRun
from clusters.validation import jobs
from clusters.validation.plan import MPI_ARGS
from metrics.vm_agent import allreduce
from vms.models import VirtualMachine, VmStatus

STRAGGLERS = {"gpu-node-03": 5}  # VM name: the rail (GPU and port) that is bad
SOFT_SLOWDOWN: dict[str, float] = {}  # VM name: the share of its soft figures it reaches
SOFT_GBPS = (9.1, 9.7)  # Soft-RoCE between guests: a few Gb/s, the host's CPUs' pace
SOFT_BUSBW_GBS = (0.52, 0.58)  # the MPI all-reduce over TCP on the same network
GPU_NAME = "NVIDIA H100 80GB HBM3"
DIAG_TESTS = {
    1: [("Deployment", "software")],
    2: [
        ("Deployment", "software"),
        ("Integration", "pcie"),
        ("Hardware", "memory"),
        ("Stress", "diagnostic"),
    ],
}
DURATIONS: dict[str, Any] = {
    ValidationJob.Kind.GPU: {1: 14.0, 2: 118.0},
    ValidationJob.Kind.NCCL_LOCAL: 24.0,
    ValidationJob.Kind.IB_SERVER: 47.0,
    ValidationJob.Kind.IB_CLIENT: 46.0,
    ValidationJob.Kind.NCCL_PAIR: 38.0,
    ValidationJob.Kind.NCCL_ALL: 61.0,
}


def _gpu_outputs(job, rng, gpus):
    listing = "".join(
        f"GPU {i}: {GPU_NAME} (UUID: GPU-{rng.getrandbits(128):032x})\n" for i in range(gpus)
    )
    categories: dict[str, Any] = {}
    for category, name in DIAG_TESTS[job.params.get("level", 1)]:
        results = [
            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": i, "status": "Pass"}
            for i in range(gpus)
        ]
        categories.setdefault(category, []).append(
            {"name": name, "results": results, "test_summary": {"status": "Pass"}}
        )
    document = {
        "DCGM Diagnostic": {
            "test_categories": [{"category": c, "tests": t} for c, t in categories.items()]
        },
        "metadata": {"Driver Version Detected": "570.124.06", "version": "4.1.1"},
    }
    return [
        {"tool": "nvidia-smi", "stdout": listing, "exit_code": 0},
        {"tool": "dcgmi", "stdout": json.dumps(document, indent="\t"), "exit_code": 0},
    ]


RULE = "-" * 87 + "\n"


def _ib_text(device, gbps, roce):
    link = "Ethernet" if roce else "IB"
    return (
        RULE + "                    RDMA_Write BW Test\n"
        f" Dual-port       : OFF\t\tDevice         : {device}\n"
        " Number of qps   : 1\t\tTransport type : IB\n"
        " Connection type : RC\t\tUsing SRQ      : OFF\n"
        " TX depth        : 128\n"
        " Mtu             : 4096[B]\n"
        f" Link type       : {link}\n"
        + (" GID index       : 3\n" if roce else "")
        + RULE
        + " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        f" 1048576    {int(gbps * 5e9 / 8 / 1048576):<16d} {gbps + 0.4:<18.2f} {gbps:<14.2f}"
        f" {gbps * 1e9 / 8 / 1048576 / 1e6:.6f}\n" + RULE
    )


def _ports_text(devices, bad_rail, stage):
    lines = []
    for i, device in enumerate(devices):
        errors = (37 if stage == "before" else 412) if i == bad_rail else 0
        lines += [
            f"== {device}/1 ==",
            "state: 4: ACTIVE",
            "rate: 400 Gb/sec (4X NDR)",
            f"symbol_error: {errors}",
            "link_downed: 0",
        ]
    return "\n".join(lines) + "\n"


def _soft_share(names) -> float:
    return min((SOFT_SLOWDOWN.get(n, 1.0) for n in names), default=1.0)


def _soft_ib_outputs(job, rng, names):
    gbps = round(rng.uniform(*SOFT_GBPS) * _soft_share([job.vm_name, *names]), 2)
    ports = "== rxe0/1 ==\nstate: 4: ACTIVE\nrate: 10 Gb/sec (1X QDR)\n"
    outputs = [{"tool": "ports", "stage": "before", "exit_code": 0, "stdout": ports}]
    text = _ib_text("rxe0", gbps, True)
    outputs.append({"tool": "ib_write_bw", "device": "rxe0", "exit_code": 0, "stdout": text})
    if job.kind == ValidationJob.Kind.IB_CLIENT:
        outputs.append({"tool": "ports", "stage": "after", "exit_code": 0, "stdout": ports})
    return outputs


def _mpi_outputs(job, rng, names):
    """Rank 0's report of the agent's MPI all-reduce, one process per node."""
    ranks = [job.vm_name, *names]
    busbw = rng.uniform(*SOFT_BUSBW_GBS) * _soft_share(ranks)
    args = dict(zip(MPI_ARGS[::2], MPI_ARGS[1::2], strict=True))
    rows, busbws = [], []
    sizes = allreduce.sizes(
        allreduce.parse_size(args["-b"]), allreduce.parse_size(args["-e"]), int(args["-f"])
    )
    for size in sizes:
        bus = busbw * rng.uniform(0.97, 1.01)
        seconds = size / (bus / allreduce.bus_factor(len(ranks)) * 1e9)
        rows.append(allreduce.row(size, len(ranks), (seconds, 0), (seconds * 1.01, 0)))
        busbws.append(bus)
    hosts = [(name, 4000 + rank) for rank, name in enumerate(ranks)]
    text = allreduce.report(hosts, rows, busbws, "eth1")
    return [{"tool": "allreduce", "exit_code": 0, "stdout": text}]


def _ib_outputs(job, rng, names, roce):
    if job.params.get("device") == "auto":
        return _soft_ib_outputs(job, rng, names)
    devices = [f"mlx5_{i}" for i in range(job.params["ports"])]
    involved = {job.vm_name, *names}
    bad_rail = next((STRAGGLERS[n] for n in involved if n in STRAGGLERS), None)
    own_bad = STRAGGLERS.get(job.vm_name)
    outputs = [
        {
            "tool": "ports",
            "stage": "before",
            "exit_code": 0,
            "stdout": _ports_text(devices, own_bad, "before"),
        }
    ]
    for i, device in enumerate(devices):
        gbps = rng.uniform(388.0, 393.5) if i != bad_rail else rng.uniform(141.0, 156.0)
        outputs.append(
            {
                "tool": "ib_write_bw",
                "device": device,
                "exit_code": 0,
                "stdout": _ib_text(device, round(gbps, 2), roce),
            }
        )
    if job.kind == ValidationJob.Kind.IB_CLIENT:
        outputs.append(
            {
                "tool": "ports",
                "stage": "after",
                "exit_code": 0,
                "stdout": _ports_text(devices, own_bad, "after"),
            }
        )
    return outputs


def _nccl_text(hosts, gpus_per_host, busbw, rng):
    ranks = [(h, d) for h in hosts for d in range(gpus_per_host)]
    lines = [
        f"# nThread 1 nGpus {1 if len(hosts) > 1 else gpus_per_host} minBytes 536870912 "
        "maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    lines += [
        f"#  Rank {r:2d} Group  0 Pid {40000 + r:6d} on {h} device  {d} [0x{24 + d * 17:02x}] "
        f"{GPU_NAME}"
        for r, (h, d) in enumerate(ranks)
    ]
    n = len(ranks)
    factor = 2 * (n - 1) / n
    lines += [
        "#",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ]
    total = 0.0
    for step in range(5):
        size = 536870912 << step
        bus = busbw * (0.975 + 0.006 * step) + rng.uniform(-0.4, 0.4)
        alg = bus / factor
        usec = size / (alg * 1e3)
        total += bus
        lines.append(
            f"{size:12d}  {size // 4:12d}     float     sum      -1  {usec:7.0f}  {alg:6.2f}  "
            f"{bus:6.2f}      0  {usec:7.0f}  {alg:6.2f}  {bus + 0.1:6.2f}      0"
        )
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {total / 5:.3f} ", "#"]
    return "\n".join(lines) + "\n"


def _nccl_outputs(job, rng, names):
    if job.params.get("runner") == "mpi":
        return _mpi_outputs(job, rng, names)
    involved = [job.vm_name, *names]
    slow = any(n in STRAGGLERS for n in involved)
    if job.kind == ValidationJob.Kind.NCCL_LOCAL:
        return [
            {
                "tool": "all_reduce_perf",
                "exit_code": 0,
                "stdout": _nccl_text(
                    [job.vm_name], job.params["gpus"], rng.uniform(474.0, 481.0), rng
                ),
            }
        ]
    busbw = rng.uniform(226.0, 236.0) if slow else rng.uniform(452.0, 458.0)
    return [
        {
            "tool": "all_reduce_perf",
            "exit_code": 0,
            "stdout": _nccl_text(involved, job.params["gpus"], busbw, rng),
        }
    ]


def outputs_for(job, names: dict, roce: bool) -> dict:
    """What a healthy (or the straggler's) agent would post for ``job``."""
    rng = random.Random(f"{job.run_id}:{job.pk}")  # noqa: S311 - the simulator's figures, never a secret
    peers = [names.get(pk, "?") for pk in job.peers]
    if job.kind == ValidationJob.Kind.GPU:
        outputs = _gpu_outputs(job, rng, job.vm.instance_type.gpu_count)
        seconds = DURATIONS[ValidationJob.Kind.GPU][job.params.get("level", 1)]
    elif job.kind in (ValidationJob.Kind.IB_SERVER, ValidationJob.Kind.IB_CLIENT):
        outputs, seconds = _ib_outputs(job, rng, peers, roce), DURATIONS[job.kind]
    else:
        outputs, seconds = _nccl_outputs(job, rng, peers), DURATIONS[job.kind]
    return {"outputs": outputs, "seconds": round(seconds * rng.uniform(0.95, 1.08), 1)}


def answer_phase(run) -> bool:
    """Claim and answer the current phase's jobs of the running members; True once the run
    is finished."""
    members = VirtualMachine.objects.filter(pk__in=run.jobs.values("vm_id"))
    names = dict(members.values_list("pk", "name"))
    running = set(members.filter(status=VmStatus.RUNNING).values_list("pk", flat=True))
    roce = run.operation.cluster is not None and run.operation.cluster.fabric_type == "ROCE_V2"
    claimed = [job for vm_id in sorted(running) for job in jobs.claim(vm_id)]
    if settings.SIMULATOR_STEP_SECONDS:
        time.sleep(settings.SIMULATOR_STEP_SECONDS)  # the phase's tools at work
    for job in claimed:
        job = ValidationJob.objects.select_related("vm__instance_type").get(pk=job.pk)
        assert job.vm_id is not None  # noqa: S101 - claimed by a member, so it has one
        try:
            jobs.record(job.vm_id, {"job": job.pk, **outputs_for(job, names, roce)})
        except jobs.JobRefused:  # timed out meanwhile (a slow worker): the run goes on
            continue
    return jobs.settle(run.pk)


def answer_jobs(operation_id: int, *, every_phase: bool = False) -> int | None:
    """Answer the run's open phase (one phase is well within the task time limit), and with
    ``every_phase`` (eager tasks) the phases after it too. Returns the seconds after which
    its task (``clusters.tasks.answer_validation``) looks again, or None when nothing is
    left to answer: the next phase at once, one still waiting on a silent member later."""
    run = ValidationRun.objects.select_related("operation__cluster").filter(pk=operation_id).first()
    if run is None or run.finished_at is not None:
        return None
    phase = run.phase
    done = answer_phase(run)
    if every_phase:
        while not done:
            run.refresh_from_db()
            if run.phase == phase:  # nothing more to answer (the silent time out later)
                return None
            phase = run.phase
            done = answer_phase(run)
        return None
    if done:
        return None
    run.refresh_from_db()
    return 0 if run.phase != phase else 5
