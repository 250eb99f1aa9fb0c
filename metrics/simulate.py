"""Samples for the simulated GPU cloud (SPEC §8): what an agent on each running VM would send.

A training-like profile: GPUs near full while the job steps, a short dip every ten minutes
(checkpoint: GPUs wait, the network carries the upload), fabric traffic that follows GPU
work (all-reduce) on members of a running cluster, a ramp over the first minute after start,
and noise. Deterministic in (VM, time), so a rerun writes the same figures. Stopped VMs send
nothing, as a real stopped VM would.
"""

import math
import random

from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import errors, storage
from metrics.models import METRIC_NAMES
from vms.models import VirtualMachine, VmStatus

CHECKPOINT_EVERY = 600  # seconds between checkpoints
CHECKPOINT_LENGTH = 30
WARMUP = 60
FABRIC_PEAK = 22e9  # bytes/s per member during all-reduce (~180 Gbit/s of a 200G HCA)


def emit_samples(now=None):
    """Write one sample at ``now`` for every RUNNING VM, as agents' batches are written;
    returns how many were written (none for a tick at an instant already written: the same
    samples again)."""
    now = now or timezone.now()
    vms = VirtualMachine.objects.filter(status=VmStatus.RUNNING).values_list(
        "pk", "status_changed_at", "cluster__status", "instance_type__gpu_count"
    )
    rows = []
    for vm_id, started, cluster_status, gpus in vms:
        metrics = simulated_metrics(vm_id, now, started, cluster_status, gpus)
        rows.append((vm_id, now, *(metrics[name] for name in METRIC_NAMES)))
    if not rows:
        return 0
    try:
        storage.write_samples(rows)
    except errors.Duplicate:
        return 0
    return len(rows)


def simulated_metrics(vm_id, now, started, cluster_status, gpu_count):
    t = now.timestamp()
    rng = random.Random(f"{vm_id}:{int(t // 10)}")
    warm = min(max((t - started.timestamp()) / WARMUP, 0.0), 1.0)
    # Each VM checkpoints at its own offset; one in a few runs a little slower (a straggler).
    phase = (t + vm_id * 37) % CHECKPOINT_EVERY
    checkpoint = phase < CHECKPOINT_LENGTH
    straggle = 6.0 if vm_id % 5 == 0 else 0.0
    wave = 1.5 * math.sin(t / 47.0 + vm_id)
    if checkpoint:
        gpu = 12.0 + rng.uniform(0, 10)
    else:
        gpu = 95.0 - straggle + wave + rng.gauss(0, 1.5)
    gpu = _clamp(gpu * warm, 0, 100)
    on_fabric = cluster_status == ClusterStatus.RUNNING
    fabric = FABRIC_PEAK * gpu / 100 * rng.uniform(0.9, 1.05) if on_fabric else None
    metrics = {
        "cpu_util": _clamp((28.0 + rng.gauss(0, 3) + 15.0 * checkpoint) * warm + 2, 0, 100),
        "mem_util": _clamp(18.0 + 24.0 * warm + rng.gauss(0, 0.5), 0, 100),
        "net_rx": max(60e6 * warm * rng.uniform(0.7, 1.3), 0.0),
        "net_tx": max((900e6 if checkpoint else 6e6) * warm * rng.uniform(0.8, 1.2), 0.0),
        "fabric_rx": fabric,
        "fabric_tx": None if fabric is None else fabric * rng.uniform(0.97, 1.03),
        "gpu_util": None,
        "gpu_mem_util": None,
    }
    if gpu_count:
        metrics["gpu_util"] = gpu
        metrics["gpu_mem_util"] = _clamp(78.0 * warm + rng.gauss(0, 0.8), 0, 100)
    return metrics


def _clamp(value, lowest, highest):
    return min(max(value, lowest), highest)
