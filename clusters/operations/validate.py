"""클러스터 검증 as one Operation of kind VALIDATE, an item per running
member, planned by what the backend gave each guest (its GPUs, a soft fabric). The jobs
(``clusters.validation.plan``) wait for the members' agents, which fetch them with their
metrics tokens (``metrics.views.jobs``); ``watch_validation`` times out the silent and ends
the run when no agent posts anything more. With the simulator backend (no agents on its VMs)
``clusters.validation.agent_sim`` answers for the running members.
"""

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from clusters.locking import lock_members
from clusters.models import Operation, OperationItem
from clusters.models.validation import ValidationJob, ValidationRun
from clusters.operations.internal import add_item, cluster_frame, cluster_operation
from clusters.validation import baseline, jobs
from clusters.validation.errors import LevelInvalid
from clusters.validation.plan import TIMEOUTS, plan_jobs, ring_neighbours
from clusters.validation.rules import validate_refusal
from clusters.validation.thresholds import threshold_for
from portal.compute.backends import get_backend
from portal.foundation.broker import publish
from portal.foundation.kernel import Actor, raise_if
from portal.iam.permissions import Perm
from vms import health
from vms.models import VirtualMachine, VmStatus

LEVELS = (1, 2)
WATCH_EVERY = 5.0


def rank_order(vms: Iterable[VirtualMachine]) -> list[VirtualMachine]:
    """Members in node_rank order (unranked last, by id): the ring and rank 0 of the run."""
    return sorted(vms, key=lambda vm: (vm.node_rank is None, vm.node_rank or 0, vm.pk))


def start_validation(
    cluster_id: object,
    *,
    actor: Actor,
    level: int = 1,
    idempotency: tuple[str, ...] | None = None,
    focus: int | None = None,
    evidence: dict[str, Any] | None = None,
) -> Operation:
    """클러스터 검증: ``validate_refusal`` decides on the locked rows; the run's thresholds
    are those of the cluster's instance type and fabric now (kept with the run). With
    ``focus`` (a running member's id) a targeted run: that member and its ring neighbours
    only, its own checks and its links (``plan_jobs``); ``evidence`` says what started it."""
    if str(level) not in {str(value) for value in LEVELS}:
        raise LevelInvalid()
    frame = cluster_frame("operation.validate", actor, cluster_id, Perm.CLUSTER_UPDATE)
    with frame as (att, cluster):
        running = rank_order(vm for vm in lock_members(cluster) if vm.status == VmStatus.RUNNING)
        if focus is not None:
            running = ring_neighbours(running, focus)
        raise_if(validate_refusal(cluster, len(running), jobs.open_run_of(cluster) is not None))
        operation = cluster_operation(
            Operation.Kind.VALIDATE, cluster, actor=actor, idempotency=idempotency
        )
        if focus is not None or evidence:
            operation.evidence = {**(evidence or {}), "focus": focus}
            operation.save(update_fields=["evidence"])
        threshold = threshold_for(cluster.instance_type, cluster.fabric_type)
        hardware = get_backend().guest_hardware(running)
        run = ValidationRun.objects.create(
            operation=operation,
            level=int(level),
            thresholds=threshold.snapshot() | baseline.regime(cluster, hardware),
        )
        OperationItem.objects.bulk_create(
            add_item(operation, position, vm) for position, vm in enumerate(running)
        )
        ValidationJob.objects.bulk_create(plan_jobs(run, cluster, running, hardware, focus))
        health.validation_started(running, run.pk, actor)
        jobs.settle(run.pk)  # opens the first phase
        att.notice("operation_queued", total=len(running))
        transaction.on_commit(lambda: publish("clusters.tasks.watch_validation", operation.pk))
        if get_backend().emits_metrics:  # simulated VMs run no agent: answer for them
            transaction.on_commit(lambda: publish("clusters.tasks.answer_validation", operation.pk))
    return operation


def longest_run_seconds(level: int) -> float:
    """How long a run may take at most: every phase at its longest, plus the waits."""
    per_phase = [TIMEOUTS[ValidationJob.Kind.GPU][level]] + [
        value for kind, value in TIMEOUTS.items() if kind != ValidationJob.Kind.GPU
    ]
    return float(sum(per_phase) + 7 * (jobs.FETCH_WAIT_SECONDS + jobs.GRACE_SECONDS))


def watch_validation(operation_id: int) -> float:
    """Settle a run (time-outs, phases, the end). While it is open, how long it may take at
    most, in seconds: its task (``clusters.tasks.watch_validation``) looks again every few
    seconds until then; 0 once it is done."""
    run = ValidationRun.objects.filter(pk=operation_id).first()
    if run is None or jobs.settle(run.pk):
        return 0.0
    return longest_run_seconds(run.level)
