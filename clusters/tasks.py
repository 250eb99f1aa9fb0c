"""Celery tasks for SPEC §4: thin wrappers; the logic is in ``clusters.progress``.

Tasks take primary keys and are idempotent, so they are acked late and requeued if a worker
dies; the reconciler (beat) repairs whatever is left past its timeout.
"""

from typing import Any

from celery import shared_task
from django.db import OperationalError

from clusters import progress
from portal.broker import publish

IDEMPOTENT: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": 2,
    "retry_backoff_max": 30,
    "max_retries": 5,
}


@shared_task(**IDEMPOTENT)
def advance_cluster(cluster_id, generation=None):
    """One step; the next one is its own task, so a dead worker loses at most one step."""
    if progress.advance_cluster(cluster_id, generation):
        publish(advance_cluster, cluster_id, generation)


@shared_task(**IDEMPOTENT)
def release_cluster(cluster_id):
    progress.release_cluster(cluster_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def reconcile():
    return progress.reconcile()


@shared_task(acks_late=True, reject_on_worker_lost=True)
def sync_gpu_hosts():
    """동기화 of every GPU host's inventory (beat); needs libvirt-python only when hosts exist."""
    from clusters.models.hosts import GpuHost

    if not GpuHost.objects.exists():
        return {}
    from portal.compute.backends.libvirt.inventory import sync_all

    return sync_all()
