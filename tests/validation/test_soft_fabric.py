"""클러스터 검증 of members on declared slots (no GPU, Soft-RoCE) on the simulator: the GPU
steps say 건너뜀 — GPU 없음, ib_write_bw runs over rxe0 and the all-reduce is the agent's MPI
benchmark; the start's first passing run records the baseline, later runs are held to it
(naming both members of a low pair and the direction), the page shows baseline beside now,
and the next start records its own."""

import pytest
from django.urls import reverse
from django.utils import translation

from clusters import operations, services
from clusters.models import ClusterStatus, ValidationBaseline, ValidationJob
from clusters.models.validation import Verdict
from clusters.validation import agent_sim, verdict
from portal.compute.backends.simulator import SimulatorBackend
from vms.models import VmStatus

NAMES = ["soft-a", "soft-b", "soft-c"]


@pytest.fixture
def soft_cluster(world, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "declared_slots", set(NAMES))
    monkeypatch.setattr(agent_sim, "SOFT_SLOWDOWN", {})
    world.capacity(16)
    cluster = world.cluster("soft")
    for i, name in enumerate(NAMES):
        vm = world.vm(name, private_ip=f"10.0.0.{i + 20}")
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    cluster.refresh_from_db()
    return cluster


def validate(world, cluster, capture):
    with capture(execute=True):
        operation = operations.start_validation(cluster.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done
    return operation.validation


def judged(run):
    with translation.override("ko"):
        return {
            v.vm_name: (v.verdict, [verdict.reason_text(r) for r in v.reasons])
            for v in run.verdicts.all()
        }


def test_the_first_run_skips_the_gpu_steps_and_records_the_baseline(
    world, soft_cluster, django_capture_on_commit_callbacks
):
    run = validate(world, soft_cluster, django_capture_on_commit_callbacks)
    skipped = run.jobs.filter(kind__in=[ValidationJob.Kind.GPU, ValidationJob.Kind.NCCL_LOCAL])
    assert skipped.count() == 6
    assert set(skipped.values_list("status", flat=True)) == {ValidationJob.Status.SKIPPED}
    assert not run.jobs.filter(kind=ValidationJob.Kind.NCCL_PAIR).exists()
    mpi = run.jobs.get(kind=ValidationJob.Kind.NCCL_ALL)
    assert mpi.vm_name == "soft-a" and mpi.params["runner"] == "mpi"
    assert mpi.params["nodes"] == 3 and mpi.raw[0]["tool"] == "allreduce"
    assert mpi.figures["nccl"]["runner"] == "mpi" and 0.4 < mpi.figures["nccl"]["busbw_gbs"] < 1
    ib = run.jobs.get(kind=ValidationJob.Kind.IB_CLIENT, vm_name="soft-a")
    assert ib.params["device"] == "auto" and ib.params["address"] == "10.0.0.20"
    assert (ib.params["bytes"], ib.params["seconds"]) == (1 << 16, 8)  # many messages
    # One pair at a time (the members share the host's CPUs): each client with its server
    # alone in a phase of its own, the all-reduce after the last.
    kinds = (ValidationJob.Kind.IB_CLIENT, ValidationJob.Kind.IB_SERVER)
    by_phase: dict = {}
    for job in run.jobs.filter(kind__in=kinds):
        by_phase.setdefault(job.phase, []).append((job.kind, job.vm_name, job.peers))
    assert len(by_phase) == 3 and all(len(jobs) == 2 for jobs in by_phase.values())
    for jobs in by_phase.values():
        (client,) = [j for j in jobs if j[0] == ValidationJob.Kind.IB_CLIENT]
        (server,) = [j for j in jobs if j[0] == ValidationJob.Kind.IB_SERVER]
        assert client[2] == [
            run.jobs.get(pk__isnull=False, kind=server[0], vm_name=server[1]).vm_id
        ]
    assert mpi.phase > max(by_phase)
    assert (
        ib.figures["devices"] == ["rxe0"] and ib.params["gid_index"] is None
    )  # the agent finds it
    assert run.thresholds["soft_fabric"] and run.thresholds["baseline"] is None
    # Each member: 정상, its GPU steps saying so, never 불량 nor a success of their own.
    for name, (level, reasons) in judged(run).items():
        assert level == Verdict.OK, name
        assert reasons == ["GPU 진단: 건너뜀 — GPU 없음", "노드 내 all-reduce: 건너뜀 — GPU 없음"]
    baseline = ValidationBaseline.objects.get(cluster=soft_cluster)
    assert baseline.generation == soft_cluster.generation and baseline.run_id == run.pk
    pairs = {(p["client_name"], p["server_name"]): p["gbps"] for p in baseline.pairs}
    assert set(pairs) == {("soft-a", "soft-b"), ("soft-b", "soft-c"), ("soft-c", "soft-a")}
    assert all(9 < gbps < 10 for gbps in pairs.values())
    assert baseline.allreduce_busbw_gbs == mpi.figures["nccl"]["busbw_gbs"]


def test_later_runs_are_held_to_the_baseline_naming_the_pair_and_direction(
    world, soft_cluster, login, django_capture_on_commit_callbacks, monkeypatch
):
    validate(world, soft_cluster, django_capture_on_commit_callbacks)
    monkeypatch.setattr(agent_sim, "SOFT_SLOWDOWN", {"soft-b": 0.4})
    run = validate(world, soft_cluster, django_capture_on_commit_callbacks)
    assert run.thresholds["baseline"]["pairs"] and run.thresholds["baseline_percent"] == 70
    verdicts = judged(run)
    assert verdicts["soft-a"] == (Verdict.OK, verdicts["soft-a"][1])
    assert verdicts["soft-c"][0] == Verdict.OK
    level, reasons = verdicts["soft-b"]
    assert level == Verdict.BAD
    low = [r for r in reasons if r.startswith("ib_write_bw")]
    assert len(low) == 2, reasons
    assert any(r.startswith("ib_write_bw soft-a → soft-b: ") for r in low), low
    assert any(r.startswith("ib_write_bw soft-b → soft-c: ") for r in low), low
    assert all("기준선의 70% 미만" in r for r in low), low
    assert any("MPI all-reduce" in r for r in reasons), reasons
    assert ValidationBaseline.objects.filter(cluster=soft_cluster).count() == 1  # kept
    page = login("operator").get(reverse("clusters:validation_section", args=[soft_cluster.pk]))
    text = page.text
    assert "기준선의 70% 미만이면 불량입니다" in text
    assert 'data-baseline-row="ib_write_bw soft-a → soft-b"' in text
    # Figures in 3 significant digits: a soft fabric's few MB/s are not 0.00 or 0.01 Gb/s.
    pair = ValidationBaseline.objects.get(cluster=soft_cluster).pairs[0]
    assert f"{pair['gbps']:.3g} Gb/s" in text
    # ... in each check's 수치 too: its measured range, not "0.0–0.0 Gb/s".
    client = run.jobs.filter(kind=ValidationJob.Kind.IB_CLIENT, vm_name="soft-a").get()
    (measured,) = [bw["average_gbps"] for bw in client.figures["bw"].values()]
    assert f"포트 1개, {measured:.3g}–{measured:.3g} Gb/s" in text
    assert "이 검증의 수치를 이번 시작의 기준선으로 기록했습니다." in text  # the first run
    assert "GPU 없음" in text


def test_a_failed_first_run_records_nothing_and_the_next_start_has_its_own(
    world, soft_cluster, django_capture_on_commit_callbacks, monkeypatch
):
    run = validate(world, soft_cluster, django_capture_on_commit_callbacks)
    assert ValidationBaseline.objects.get(cluster=soft_cluster).run_id == run.pk
    type(soft_cluster).objects.filter(pk=soft_cluster.pk).update(
        generation=soft_cluster.generation + 1
    )
    soft_cluster.refresh_from_db()
    # The new start's first run fails (a soft pair's tool fails): no baseline is recorded.
    real = agent_sim._soft_ib_outputs

    def refused(job, rng, names):
        outputs = real(job, rng, names)
        if job.vm_name == "soft-c" and job.kind == ValidationJob.Kind.IB_CLIENT:
            outputs[1] = {**outputs[1], "stdout": "Couldn't connect to 10.0.0.20:18515\n"}
            outputs[1]["exit_code"] = 1
        return outputs

    monkeypatch.setattr(agent_sim, "_soft_ib_outputs", refused)
    run = validate(world, soft_cluster, django_capture_on_commit_callbacks)
    assert run.thresholds["baseline"] is None  # the last start's is not this one's
    verdicts = judged(run)
    assert verdicts["soft-c"][0] == Verdict.BAD and verdicts["soft-a"][0] == Verdict.BAD
    assert any(r.startswith("ib_write_bw soft-c → soft-a 측정 실패") for r in verdicts["soft-c"][1])
    assert verdicts["soft-b"][0] == Verdict.OK
    assert ValidationBaseline.objects.filter(cluster=soft_cluster).count() == 1
    monkeypatch.setattr(agent_sim, "_soft_ib_outputs", real)
    run = validate(world, soft_cluster, django_capture_on_commit_callbacks)
    assert ValidationBaseline.objects.get(generation=soft_cluster.generation).run_id == run.pk


def test_members_with_gpus_on_real_hcas_keep_the_catalog(
    world, soft_cluster, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr(SimulatorBackend, "declared_slots", set())
    run = validate(world, soft_cluster, django_capture_on_commit_callbacks)
    assert "generation" not in run.thresholds and run.thresholds["ports"] == 8
    assert not run.jobs.filter(status=ValidationJob.Status.SKIPPED).exists()
    assert run.jobs.filter(kind=ValidationJob.Kind.NCCL_PAIR).count() == 3
    assert not ValidationBaseline.objects.exists()
