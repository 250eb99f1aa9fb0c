"""Samples for the simulated GPU cloud: what an agent on each running VM would send.

A training-like profile: GPUs near full while the job steps, a short dip every ten minutes
(checkpoint: GPUs wait, the network carries the upload), fabric traffic that follows GPU
work (all-reduce) on members of a running cluster, a ramp over the first minute after start,
and noise. Per GPU and per fabric port too: each GPU a little off its node's step,
temperature and power following its load, eight 400 Gb/s ports sharing the node's traffic.
Deterministic in (VM, time), so a rerun writes the same figures. Stopped VMs send nothing,
as a real stopped VM would.

The demo's straggler: a VM named ``STRAGGLER`` (gpu-node-03, README) runs its GPU 5 at about
60% of its peers' utilisation and its port 5 (GPU 5's rail, as the validation simulator's bad
rail) at half its peers' throughput, whenever it runs, so the 메트릭 tab has a slow node to
find.
"""

import math
import random

from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import errors, storage
from metrics.models import METRIC_NAMES
from metrics.models.devices import GPU_NAMES, PORT_NAMES
from vms.models import VirtualMachine, VmStatus

CHECKPOINT_EVERY = 600  # seconds between checkpoints
CHECKPOINT_LENGTH = 30
WARMUP = 60
PORTS = 8  # one 400G NDR port per GPU (a rail), as on H100 nodes
PORT_GBPS = 400.0
PORT_PEAK = 38e9  # bytes/s per port during all-reduce (~300 of its 400 Gbit/s)
GPU_MEMORY_MIB = 81559.0  # an H100 80GB as NVML reports it
STRAGGLER = "gpu-node-03"
STRAGGLER_GPU, STRAGGLER_GPU_SHARE = 5, 0.6
STRAGGLER_PORT, STRAGGLER_PORT_SHARE = 5, 0.5  # GPU 5's rail (mlx5_5)


def emit_samples(now=None):
    """Write one sample at ``now`` (with its GPU and port rows) for every RUNNING VM, as
    agents' batches are written; returns how many samples were written (none for a tick at
    an instant already written: the same samples again)."""
    now = now or timezone.now()
    vms = VirtualMachine.objects.filter(status=VmStatus.RUNNING).values_list(
        "pk", "status_changed_at", "cluster__status", "instance_type__gpu_count", "name"
    )
    rows, devices = sample_rows(vms, now)
    if not rows:
        return 0
    try:
        storage.write_samples(rows, devices=devices)
    except errors.Duplicate:
        return 0
    return len(rows)


def sample_rows(vms, now, slow=None) -> tuple[list, dict]:
    """(rows, devices) as ``storage.write_samples`` takes them: one sample at ``now`` of each
    of ``vms`` ((pk, started, cluster status, GPU count, name)); ``slow`` ({vm_id: {GPU:
    share}}) slows GPUs down."""
    rows: list = []
    devices: dict[str, list] = {"gpu": [], "port": []}
    for vm_id, started, cluster_status, gpus, name in vms:
        metrics = simulated_metrics(
            vm_id, now, started, cluster_status, gpus, name, (slow or {}).get(vm_id)
        )
        rows.append((vm_id, now, *(metrics[field] for field in METRIC_NAMES)))
        for key, table, names in (("gpus", "gpu", GPU_NAMES), ("ports", "port", PORT_NAMES)):
            for entry in metrics[key] or ():
                devices[table].append(
                    (vm_id, now, entry[table], *(entry.get(field) for field in names))
                )
    return rows, devices


def simulated_metrics(vm_id, now, started, cluster_status, gpu_count, name="", slow=None):
    """The sample of one VM at ``now``: the host fields, and ``gpus`` / ``ports`` arrays as
    the ingest API takes them (None without GPUs, or off the fabric). ``slow`` ({GPU index:
    share of its step}) injects a slowdown, as ``bench_straggler`` does; the demo's
    ``STRAGGLER`` has its own."""
    t = now.timestamp()
    rng = random.Random(f"{vm_id}:{int(t // 10)}")  # noqa: S311 - the simulator's figures, never a secret
    warm = min(max((t - started.timestamp()) / WARMUP, 0.0), 1.0)
    # Each VM checkpoints at its own offset.
    phase = (t + vm_id * 37) % CHECKPOINT_EVERY
    checkpoint = phase < CHECKPOINT_LENGTH
    wave = 1.5 * math.sin(t / 47.0 + vm_id)
    step = 12.0 + rng.uniform(0, 10) if checkpoint else 95.0 + wave
    straggler = name == STRAGGLER
    shares = {STRAGGLER_GPU: STRAGGLER_GPU_SHARE} if straggler else {}
    shares.update(slow or {})
    gpus = [
        _gpu(index, step, warm, rng, shares.get(index, 1.0)) for index in range(gpu_count or 0)
    ] or None
    gpu = (
        sum(g["util"] for g in gpus) / len(gpus)
        if gpus
        else _clamp((step + rng.gauss(0, 1.5)) * warm, 0, 100)
    )
    on_fabric = cluster_status == ClusterStatus.RUNNING
    ports = (
        [_port(index, gpu, rng, straggler and index == STRAGGLER_PORT) for index in range(PORTS)]
        if on_fabric
        else None
    )
    metrics = {
        "cpu_util": _clamp((28.0 + rng.gauss(0, 3) + 15.0 * checkpoint) * warm + 2, 0, 100),
        "mem_util": _clamp(18.0 + 24.0 * warm + rng.gauss(0, 0.5), 0, 100),
        "net_rx": max(60e6 * warm * rng.uniform(0.7, 1.3), 0.0),
        "net_tx": max((900e6 if checkpoint else 6e6) * warm * rng.uniform(0.8, 1.2), 0.0),
        "fabric_rx": sum(p["rx"] for p in ports) if ports else None,
        "fabric_tx": sum(p["tx"] for p in ports) if ports else None,
        "gpu_util": None,
        "gpu_mem_util": None,
        "gpus": gpus,
        "ports": ports,
    }
    if gpus:
        metrics["gpu_util"] = gpu
        metrics["gpu_mem_util"] = (
            100.0 * sum(g["mem_used"] for g in gpus) / (GPU_MEMORY_MIB * len(gpus))
        )
    return metrics


def _gpu(index, step, warm, rng, share):
    """One GPU: its node's step with a little noise of its own (a slow one at a share)."""
    util = step * share + rng.gauss(0, 1.2)
    util = _clamp(util * warm, 0, 100)
    return {
        "gpu": index,
        "util": round(util, 2),
        "mem_used": round(_clamp(0.78 * warm + rng.gauss(0, 0.008), 0, 1) * GPU_MEMORY_MIB, 1),
        "mem_total": GPU_MEMORY_MIB,
        "temp": round(34.0 + 0.4 * util + rng.gauss(0, 0.8), 1),
        "power": round(85.0 + 6.1 * util + rng.gauss(0, 8), 1),
        "sm_clock": 1980.0 if util > 5 else 345.0,
        "throttle": 0.0,
        "ecc_uncorrected": 0.0,
        "ecc_corrected": 0.0,
        "remapped_rows": 0.0,
        "nvlink_errors": 0.0,
        "xid": 0.0,
    }


def _port(index, gpu, rng, slow):
    """One 400 Gb/s port carrying its share of the node's all-reduce (a slow one half)."""
    rx = PORT_PEAK * gpu / 100 * rng.uniform(0.9, 1.05) * (STRAGGLER_PORT_SHARE if slow else 1)
    return {
        "port": index,
        "rx": rx,
        "tx": rx * rng.uniform(0.97, 1.03),
        "symbol_errors": 0.0,
        "link_downed": 0.0,
        "rcv_errors": 0.0,
        "state": 4.0,
        "rate_gbps": PORT_GBPS,
    }


def _clamp(value, lowest, highest):
    return min(max(value, lowest), highest)
