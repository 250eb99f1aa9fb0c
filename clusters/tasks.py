"""Celery tasks for the clusters' lifecycle and the operations: thin wrappers; the logic is in
``clusters.progress`` and ``clusters.operations`` (which queue these by name, since they
cannot import this module back), and ``clusters.validation.agent_sim`` for the simulator.

Tasks take primary keys and are idempotent, so they are acked late and requeued if a worker
dies; the reconciler (beat queues it for its own worker) repairs whatever is left past its
timeout.
"""

from typing import Any

from celery import shared_task
from django.conf import settings

from clusters import progress, tally
from clusters.operations import fanout, heal, replace, validate
from clusters.operations.internal import WATCH_EVERY
from clusters.validation import agent_sim
from portal.compute.models.hosts import GpuHost
from portal.foundation.broker import IDEMPOTENT, publish

# Tasks that look again shortly until their operation settles.
LATE: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True}


@shared_task(**IDEMPOTENT)
def advance_cluster(cluster_id, generation=None):
    """One step; the next one is its own task, so a dead worker loses at most one step."""
    if progress.advance_cluster(cluster_id, generation):
        publish(advance_cluster, cluster_id, generation)


@shared_task(**IDEMPOTENT)
def release_cluster(cluster_id):
    progress.release_cluster(cluster_id)


@shared_task(**LATE)
def reconcile():
    return progress.reconcile()


@shared_task(**IDEMPOTENT)
def merge_tally():
    """The live clusters' tally, each project's deltas merged into one row (beat)."""
    tally.merge()


@shared_task(**LATE)
def sync_gpu_hosts():
    """동기화 of every GPU host's inventory (beat); needs libvirt-python only when hosts exist."""
    if not GpuHost.objects.exists():
        return {}
    from portal.compute.backends.libvirt.inventory import sync_all

    return sync_all()


@shared_task(**LATE)
def run_items(operation_id: int, positions: list[int], then_watch: bool = True) -> None:
    """Run the single-VM action of each item at ``positions`` (``fanout.run_items``)."""
    fanout.run_items(operation_id, positions, then_watch)


@shared_task(**LATE)
def watch(operation_id: int, round: int = 0) -> None:  # `round`: Celery's keyword
    """Settle an operation's items as their VMs settle; look again shortly until done. After
    the transition timeout the reconciler (``watch_stale``) takes over."""
    rounds = settings.TRANSITION_TIMEOUT_SECONDS / WATCH_EVERY
    if fanout.watch(operation_id) and round < rounds and not watch.app.conf.task_always_eager:
        watch.apply_async((operation_id, round + 1), countdown=WATCH_EVERY)


@shared_task(**LATE)
def watch_stale() -> None:
    """The beat's look at open operations whose watcher is gone (``fanout.watch_stale``) or
    whose 교체 walk is (``replace.walk_stale``)."""
    fanout.watch_stale()
    replace.walk_stale()


@shared_task(**LATE)
def advance_replace(operation_id: int, round: int = 0) -> None:  # `round`: Celery's keyword
    """Walk a 교체 until its spare is settled; while a VM is on its way, look again shortly."""
    rounds = 2 * settings.TRANSITION_TIMEOUT_SECONDS / WATCH_EVERY
    waiting = replace.advance_replace(operation_id)
    if waiting and round < rounds and not advance_replace.app.conf.task_always_eager:
        advance_replace.apply_async((operation_id, round + 1), countdown=WATCH_EVERY)


@shared_task(**LATE)
def watch_validation(operation_id: int, round: int = 0) -> None:  # `round`: Celery's keyword
    """Settle a 검증 run (time-outs, phases, the end); look again every few seconds until done."""
    rounds = validate.watch_validation(operation_id) / WATCH_EVERY
    if round < rounds and not watch_validation.app.conf.task_always_eager:
        watch_validation.apply_async((operation_id, round + 1), countdown=WATCH_EVERY)


@shared_task(**LATE)
def answer_validation(operation_id: int) -> None:
    """The simulator's agents answer a 검증 run: one phase per task, then the next."""
    eager = answer_validation.app.conf.task_always_eager
    later = agent_sim.answer_jobs(operation_id, every_phase=eager)
    if later is not None:
        answer_validation.apply_async((operation_id,), countdown=later)


@shared_task(**LATE)
def check_suspect(vm_id: int) -> None:
    """A member just made 의심: a targeted 검증 of it and its ring neighbours."""
    heal.check_suspect(vm_id)


@shared_task(**LATE)
def act_on_bad(vm_id: int, run_id: int | None = None) -> None:
    """A member judged 불량: what its cluster's 교체 정책 does."""
    heal.act_on_bad(vm_id, run_id)


@shared_task(**LATE)
def verify_joined(operation_id: int) -> None:
    """A 교체 that took a 예비: a targeted 검증 of the new member's links."""
    heal.verify_joined(operation_id)
