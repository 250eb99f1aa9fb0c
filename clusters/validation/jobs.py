"""The agents' side of a run: a member's agent fetches the jobs of the current phase
(``claim``) and posts each one's raw output (``record``); ``settle`` times out the silent,
moves the run to its next phase and, after the last, writes the verdicts and ends the
Operation. Everything is keyed by the VM the agent's metrics token belongs to.

The portal parses the raw output itself (``metrics.vm_agent.toolparse``, the agent's own parsers):
the figures a verdict is built on are always those of the text stored with it.
"""

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters import events
from clusters.models import OperationItem
from clusters.models.validation import ValidationJob, ValidationRun, ValidationVerdict, Verdict
from clusters.validation import baseline, verdict
from metrics.vm_agent import toolparse
from metrics.vm_agent.jobs import NOT_FOUND
from portal.foundation.audit import Attempt, build_event, record_many
from portal.models import AuditEvent
from vms import health

log = logging.getLogger(__name__)
FETCH_WAIT_SECONDS = 60  # an agent polls every few seconds: a minute of silence is an answer
GRACE_SECONDS = 30  # past the job's own timeout, for the post to arrive
MAX_OUTPUT_CHARS = 200_000  # per output: dcgmi -r 2 --json is ~60 kB for 8 GPUs
MAX_OUTPUTS = 40
OPEN = (ValidationJob.Status.PENDING, ValidationJob.Status.RUNNING)


def claim(vm_id: int) -> list[ValidationJob]:
    """The jobs ``vm_id``'s agent may run now, marked as fetched."""
    now = timezone.now()
    with transaction.atomic():
        jobs = list(
            ValidationJob.objects.select_for_update(of=("self",))
            .filter(vm_id=vm_id, status=ValidationJob.Status.PENDING, run__finished_at__isnull=True)
            .select_related("run")
            .order_by("pk")
        )
        ready = [job for job in jobs if job.phase == job.run.phase]
        for job in ready:
            job.status, job.fetched_at = ValidationJob.Status.RUNNING, now
        ValidationJob.objects.bulk_update(ready, ["status", "fetched_at"])
    return ready


class JobRefused(ValueError):
    """A post the portal cannot take: ``status`` 400 (malformed), 404 (not this VM's job),
    409 (already finished or timed out)."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def clean_outputs(payload) -> tuple[int, list[dict], float | None]:
    """The posted ``{"job": id, "outputs": [{"tool", "stdout", "exit_code", "device"?,
    "stage"?}], "seconds"}``, checked, or ``JobRefused(400)``."""
    if not isinstance(payload, dict) or not isinstance(payload.get("outputs"), list):
        raise JobRefused(400, "body must be an object with an 'outputs' array")
    job_id = payload.get("job")
    if type(job_id) is not int or not 0 < job_id < 2**63:
        raise JobRefused(400, "'job' must be the job's id")
    outputs = payload["outputs"]
    if not 0 < len(outputs) <= MAX_OUTPUTS:
        raise JobRefused(400, f"'outputs' must hold 1 to {MAX_OUTPUTS} entries")
    cleaned = []
    for n, out in enumerate(outputs):
        if not isinstance(out, dict) or out.get("tool") not in toolparse.PARSERS:
            raise JobRefused(400, f"outputs[{n}].tool must be one of {sorted(toolparse.PARSERS)}")
        stdout, code = out.get("stdout", ""), out.get("exit_code")
        if not isinstance(stdout, str) or len(stdout) > MAX_OUTPUT_CHARS:
            raise JobRefused(
                400, f"outputs[{n}].stdout must be text of at most {MAX_OUTPUT_CHARS} characters"
            )
        if type(code) is not int or not -(2**31) <= code < 2**31:
            raise JobRefused(400, f"outputs[{n}].exit_code must be an integer")
        entry = {"tool": out["tool"], "stdout": without_nul(stdout), "exit_code": code}
        for key in ("device", "stage"):
            if isinstance(out.get(key), str):
                entry[key] = without_nul(out[key][:40])
        cleaned.append(entry)
    seconds = payload.get("seconds")
    if seconds is not None and (type(seconds) not in (int, float) or not 0 <= seconds < 86400):
        raise JobRefused(400, "'seconds' must be a duration in seconds")
    return job_id, cleaned, seconds


def without_nul(text: str) -> str:
    """``text`` as PostgreSQL can store it: NUL, which no text or JSON column holds, shown
    as U+FFFD. The raw output is kept this way, and parsed this way."""
    return text.replace("\x00", "\ufffd")


def figures_of(kind: str, outputs: list[dict]) -> tuple[dict, str]:
    """The job's figures from its outputs, and what failed ('' if nothing did)."""
    figures: dict[str, Any] = {}
    errors: list[str] = []
    for out in outputs:
        if out["exit_code"] == NOT_FOUND:  # the tool is not installed on the member
            if out["tool"] not in figures.setdefault("missing", []):
                figures["missing"].append(out["tool"])
            continue
        try:
            parsed = toolparse.parse(out["tool"], out["stdout"])
        except toolparse.ParseError as exc:
            parsed = {"error": str(exc)}
            if out["tool"] != "ib_write_bw":  # a port that failed is judged as that port
                errors.append(f"{out['tool']}: {exc} (exit {out['exit_code']})")
        if out["tool"] == "nvidia-smi":
            figures["gpu_list"] = parsed
        elif out["tool"] == "dcgmi":
            figures["diag"] = parsed
        elif out["tool"] in ("all_reduce_perf", "allreduce"):
            figures["nccl"] = parsed
        elif out["tool"] == "ports":
            figures[f"ports_{out.get('stage', 'after')}"] = parsed
        elif out["tool"] == "ib_write_bw":
            device = out.get("device") or parsed.get("device") or f"port{len(figures)}"
            figures.setdefault("bw", {})[device] = parsed
            figures.setdefault("devices", []).append(device)
    return figures, "; ".join(errors)


def record(vm_id: int, payload) -> ValidationJob:
    """Store a job's outputs, posted by ``vm_id``'s agent, then settle its run."""
    job_id, outputs, seconds = clean_outputs(payload)
    with transaction.atomic():
        job = ValidationJob.objects.select_for_update().filter(pk=job_id, vm_id=vm_id).first()
        if job is None:
            raise JobRefused(404, "no such job for this VM")
        if job.status not in OPEN:
            raise JobRefused(409, f"job already {job.status.lower()}")
        figures, error = figures_of(job.kind, outputs)
        if error:
            figures["error"] = error
        job.status = ValidationJob.Status.FAILED if error else ValidationJob.Status.DONE
        job.raw, job.figures, job.seconds = outputs, figures, seconds
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "raw", "figures", "seconds", "finished_at"])
    settle(job.run_id)
    return job


def _expire(run, now) -> None:
    """Jobs of the current phase nobody fetched in time, or ran past their timeout."""
    for job in run.jobs.filter(phase=run.phase, status__in=OPEN):
        started = job.fetched_at or run.phase_started_at
        wait = job.timeout_seconds + GRACE_SECONDS if job.fetched_at else FETCH_WAIT_SECONDS
        if started is not None and started + timedelta(seconds=wait) <= now:
            job.status, job.finished_at = ValidationJob.Status.NO_ANSWER, now
            job.save(update_fields=["status", "finished_at"])


def _next_phase(run, now) -> bool:
    """Open the next phase that has jobs; False when there is none. Jobs of a member whose
    agent has not answered are skipped, not handed out to wait for it again."""
    later = run.jobs.filter(phase__gt=run.phase, status=ValidationJob.Status.PENDING).order_by(
        "phase"
    )
    phase = later.values_list("phase", flat=True).first()
    if phase is None:
        return False
    silent = set(
        run.jobs.filter(status=ValidationJob.Status.NO_ANSWER).values_list("vm_id", flat=True)
    )
    for job in later.filter(phase=phase):
        if silent & {job.vm_id, *job.peers}:
            job.status, job.finished_at = ValidationJob.Status.SKIPPED, now
            job.save(update_fields=["status", "finished_at"])
    run.phase, run.phase_started_at = phase, now
    run.save(update_fields=["phase", "phase_started_at"])
    return True


def settle(run_id) -> bool:
    """Bring a run forward from its jobs as they are now; True once it is finished."""
    now = timezone.now()
    with transaction.atomic():
        run = ValidationRun.objects.select_for_update().select_related("operation").get(pk=run_id)
        if run.finished_at is not None:
            return True
        while True:
            _expire(run, now)
            if run.jobs.filter(phase=run.phase, status__in=OPEN).exists():
                return False
            if not _next_phase(run, now):
                break
        _finish(run, now)
    return True


def _finish(run, now) -> None:
    """Judge every member, record the start's baseline if it is the first to pass on a soft
    fabric, mark the items (정상/점검 필요 성공, 불량/응답 없음 실패), end the Operation and
    audit the outcome."""
    operation = run.operation
    items = list(operation.items.select_related("vm__instance_type").order_by("position"))
    members = [
        {"id": item.vm_id, "name": item.target_name, "gpus": item.vm.instance_type.gpu_count}
        for item in items
        if item.vm is not None
    ]
    jobs = [
        {
            "kind": j.kind,
            "vm": j.vm_id,
            "peers": j.peers,
            "status": j.status,
            "figures": j.figures,
            "timeout": j.timeout_seconds,
        }
        for j in run.jobs.all()
    ]
    judged = verdict.judge(members, jobs, run.thresholds, run.level)
    baseline.record(run, judged, {m["id"]: m["name"] for m in members})
    ValidationVerdict.objects.bulk_create(
        ValidationVerdict(run=run, vm_id=vm_id, vm_name=item.target_name, verdict=v, reasons=r)
        for item in items
        for vm_id, (v, r) in judged.items()
        if item.vm_id == vm_id
    )
    passed = (Verdict.OK, Verdict.WARN)
    for item in items:
        verdict_of = judged.get(item.vm_id, (Verdict.NO_ANSWER, []))[0]
        item.status = (
            OperationItem.Status.SUCCEEDED if verdict_of in passed else OperationItem.Status.FAILED
        )
        item.finished_at = now
    OperationItem.objects.bulk_update(items, ["status", "finished_at"])
    run.finished_at = operation.finished_at = now
    run.save(update_fields=["finished_at"])
    operation.set_error(None)  # the operations' beat may have closed it with a guess
    operation.save(update_fields=["finished_at", "error_code", "error_params"])
    counts = {v: 0 for v in Verdict.values}
    for v, _reasons in judged.values():
        counts[v] += 1
    att = Attempt(action="cluster.validated", actor=operation.actor, target_type="cluster")
    if operation.cluster is not None:
        att.about(operation.cluster)
    att.notice(
        "validation_done",
        ok=counts[Verdict.OK],
        warn=counts[Verdict.WARN],
        bad=counts[Verdict.BAD],
        silent=counts[Verdict.NO_ANSWER],
    )
    # A member judged 불량 or silent is not a success: the event says 실패 beside the counts.
    judged_bad = counts[Verdict.BAD] or counts[Verdict.NO_ANSWER]
    outcome = AuditEvent.Outcome.FAILED if judged_bad else AuditEvent.Outcome.SUCCEEDED
    record_many([build_event(att, outcome)])
    health.validation_judged(judged, run.pk, operation.actor)
    events.validation_finished(operation, run.level, judged, {m["id"]: m["name"] for m in members})


def open_run_of(cluster) -> ValidationRun | None:
    return (
        ValidationRun.objects.filter(operation__cluster=cluster, finished_at__isnull=True)
        .select_related("operation__actor")
        .order_by("-operation__created_at")
        .first()
    )
