"""The thresholds of a cluster whose figures no catalog knows: its own baseline.

Members on declared slots (``portal.compute.backends.base.GuestHardware``) have no GPU and a
soft fabric (Soft-RoCE on the cluster's network): their ``ib_write_bw`` and their MPI
all-reduce measure the host's CPUs and network, not an HCA the catalog lists. A run there
keeps, with its thresholds (``regime``), which figures are judged this way and the baseline
of the cluster's current start (``VirtualCluster.generation``), if one was recorded. The
first run after a start in which every member passed records it (``record``): each ring
pair's bandwidth, client → server, and the all-reduce's bus bandwidth. Later runs of that
start hold each figure to ``settings.VALIDATION_BASELINE_PERCENT`` of it
(``clusters.validation.verdict``). Members on real HCAs keep the catalog's thresholds.
"""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from clusters.models.validation import ValidationBaseline, ValidationJob, Verdict

Kind = ValidationJob.Kind


def regime(cluster, hardware) -> dict:
    """What a run's thresholds add for ``hardware`` (``{vm id: GuestHardware}``): nothing on
    real HCAs with GPUs; else which figures the baseline judges, the start it belongs to,
    the percentage and the baseline itself (None until the start has one)."""
    soft = any(h.soft_fabric for h in hardware.values())
    mpi = any(h.gpus == 0 for h in hardware.values())
    if not (soft or mpi):
        return {}
    found = ValidationBaseline.objects.filter(
        cluster=cluster, generation=cluster.generation
    ).first()
    added: dict = {
        "soft_fabric": soft,
        "mpi_allreduce": mpi,
        "generation": cluster.generation,
        "baseline_percent": settings.VALIDATION_BASELINE_PERCENT,
        "baseline": found.snapshot() if found is not None else None,
    }
    if soft:
        added["ports"] = 1  # one soft device, on the fabric's interface
    return added


def pair_figure(baseline: dict | None, client: int | None, server: int | None) -> float | None:
    """The baseline's bandwidth of the pair ``client`` → ``server`` (None: not recorded)."""
    for pair in (baseline or {}).get("pairs", []):
        if pair.get("client") == client and pair.get("server") == server:
            return pair.get("gbps")
    return None


def _pairs(jobs: list[ValidationJob]) -> list[dict] | None:
    pairs = []
    for job in jobs:
        if job.kind != Kind.IB_CLIENT:
            continue
        figures = job.figures or {}
        devices = figures.get("devices") or []
        bw = (figures.get("bw") or {}).get(devices[0] if devices else "", {})
        if "average_gbps" not in bw or not job.peers:
            return None  # a pair without a figure: no baseline from this run
        pairs.append(
            {
                "client": job.vm_id,
                "client_name": job.vm_name,
                "server": job.peers[0],
                "device": devices[0],
                "gbps": bw["average_gbps"],
            }
        )
    return pairs


def record(run, judged: dict, names: dict) -> ValidationBaseline | None:
    """The start's baseline from ``run``, if its thresholds ask for one, the start has none
    yet and every member passed (``judged``: ``{vm id: (verdict, reasons)}``)."""
    wanted = run.thresholds
    if "generation" not in wanted or wanted.get("baseline") is not None:
        return None
    if not judged or any(v not in (Verdict.OK, Verdict.WARN) for v, _r in judged.values()):
        return None
    jobs = list(run.jobs.filter(status=ValidationJob.Status.DONE))
    pairs = _pairs(jobs) if wanted.get("soft_fabric") else []
    if pairs is None:
        return None
    for pair in pairs:
        pair["server_name"] = names.get(pair["server"], "?")
    busbw = next(
        (
            (job.figures.get("nccl") or {}).get("busbw_gbs")
            for job in jobs
            if job.kind == Kind.NCCL_ALL and job.params.get("runner") == "mpi"
        ),
        None,
    )
    cluster = run.operation.cluster
    if cluster is None:
        return None
    try:
        with transaction.atomic():
            return ValidationBaseline.objects.create(
                cluster=cluster,
                generation=wanted["generation"],
                run=run,
                pairs=pairs,
                allreduce_busbw_gbs=busbw,
                recorded_at=timezone.now(),
            )
    except IntegrityError:  # a concurrent run of the same start recorded it first
        return None
