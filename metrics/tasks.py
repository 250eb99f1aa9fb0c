"""Beat tasks for metrics storage and the simulator's samples (schedule: ``portal.settings``)."""

from typing import Any

from celery import shared_task

from metrics import simulate, storage, stragglers
from metrics.storage import events, series_sql
from portal.compute.backends import get_backend
from portal.foundation.broker import IDEMPOTENT

# Rollups and partition upkeep are idempotent (upserts, IF NOT EXISTS): a retry or a duplicate
# delivery is harmless, so they are acked late and retried like every idempotent task.
UPKEEP: dict[str, Any] = {**IDEMPOTENT, "max_retries": 3}


@shared_task(**UPKEEP)
def rollup():
    """Minute and hour rollups of every closed bucket, and of late batches' buckets; then the
    device error events of the minutes just rolled up (``metrics.storage.events``)."""
    before = series_sql.rolled_up_to()
    advanced = storage.rollup()
    events.detect(before, series_sql.rolled_up_to())
    return advanced


@shared_task(**UPKEEP)
def maintain_storage():
    """Day partitions ahead of time, and retention."""
    created, dropped = storage.maintain()
    return {"created": created, "dropped": dropped}


@shared_task(ignore_result=True)
def emit_simulated_samples():
    """One sample per running VM, when the compute backend's VMs run no agent and the portal
    emits their metrics (``ComputeBackend.emits_metrics``: the simulator).

    Not retried and not acked late: a lost tick is a 10-second hole, a late one is noise.
    """
    if not get_backend().emits_metrics:
        return 0
    return simulate.emit_samples()


@shared_task(ignore_result=True)
def sweep_stragglers():
    """Running clusters' stragglers, named or gone, as their members' health
    (``metrics.stragglers``): not retried, the next tick judges again."""
    return len(stragglers.sweep())
