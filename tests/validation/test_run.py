"""A whole 클러스터 검증 run on the simulator: the phases, the verdicts, the straggler
gpu-node-03 judged 불량 for GPU 5 and its port, the rest 정상, 응답 없음 for a member whose
agent never answers, and the rule that refuses a run."""

from datetime import timedelta

import pytest
from django.utils import timezone, translation

from clusters import operations, services
from clusters.models import ClusterStatus, Operation, ValidationJob, ValidationThreshold
from clusters.models.validation import Verdict
from clusters.validation import jobs, verdict
from portal.compute.backends.simulator import SimulatorBackend
from portal.foundation import errors
from portal.models import AuditEvent
from vms.models import VirtualMachine, VmStatus


def running_cluster(world, names):
    world.capacity(16)
    cluster = world.cluster("train")
    for name in names:
        services.attach_vm(
            world.vm(name, private_ip=f"10.0.0.{len(name)}").pk, cluster.pk, actor=world.admin
        )
    cluster.members.update(status=VmStatus.RUNNING)
    cluster.status = ClusterStatus.RUNNING
    cluster.save()
    return cluster


NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


def verdicts(operation):
    return dict(operation.validation.verdicts.values_list("vm_name", "verdict"))


def test_a_run_on_the_simulator_finds_the_straggler(world, django_capture_on_commit_callbacks):
    cluster = running_cluster(world, NODES)
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.start_validation(cluster.pk, actor=world.admin, level=2)
    operation.refresh_from_db()
    assert operation.done and operation.kind == Operation.Kind.VALIDATE
    assert verdicts(operation) == {
        "gpu-node-01": Verdict.OK,
        "gpu-node-02": Verdict.OK,
        "gpu-node-03": Verdict.BAD,
        "gpu-node-04": Verdict.OK,
    }
    bad = operation.validation.verdicts.get(vm_name="gpu-node-03")
    with translation.override("ko"):
        texts = [verdict.reason_text(r) for r in bad.reasons]
    assert any("mlx5_5" in t and "GPU 5" in t and "Gb/s" in t for t in texts), texts
    assert any("2노드 all_reduce_perf" in t for t in texts), texts
    assert any("전체 4노드" in t for t in texts), texts
    assert any("심볼 오류" in t for t in texts), texts  # its correctable-error trend
    run = operation.validation
    assert set(run.jobs.values_list("status", flat=True)) == {ValidationJob.Status.DONE}
    assert run.jobs.count() == 4 * 4 + 4 + 1  # gpu, local, ib ×2 each; 4 ring pairs; all
    gpu = run.jobs.get(kind="gpu", vm_name="gpu-node-01")
    assert 100 < gpu.seconds < 140  # dcgmi diag -r 2 takes about two minutes
    assert gpu.figures["gpu_list"]["count"] == 8 and gpu.figures["diag"]["failed"] == []
    assert run.thresholds["ib_write_bw_gbps"] == 375.0  # the published default, kept
    assert ValidationThreshold.objects.filter(instance_type=world.h100).exists()
    items = dict(operation.items.values_list("target_name", "status"))
    assert items["gpu-node-03"] == "FAILED" and items["gpu-node-01"] == "SUCCEEDED"
    assert AuditEvent.objects.filter(action="operation.validate", outcome="SUCCEEDED").exists()
    done = AuditEvent.objects.get(action="cluster.validated")
    with translation.override("ko"):
        assert done.text == "정상 3대, 점검 필요 0대, 불량 1대, 응답 없음 0대"


def test_a_member_whose_agent_never_answers_is_no_answer(world, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)  # real agents, none here
    cluster = running_cluster(world, ["a", "b", "c"])
    operation = operations.start_validation(cluster.pk, actor=world.admin)
    run = operation.validation
    a, b, c = (VirtualMachine.objects.get(name=n) for n in "abc")
    # a and b answer every phase as the simulator would; c's agent stays silent.
    from clusters.validation import agent_sim as validation_sim

    names = {vm.pk: vm.name for vm in (a, b, c)}
    for _round in range(20):
        run.refresh_from_db()
        for vm in (a, b):
            for job in jobs.claim(vm.pk):
                job = ValidationJob.objects.select_related("vm__instance_type").get(pk=job.pk)
                answer = validation_sim.outputs_for(job, names, roce=False)
                jobs.record(vm.pk, {"job": job.pk, **answer})
        run.refresh_from_db()
        waiting = run.jobs.filter(phase=run.phase, status__in=jobs.OPEN)
        if waiting.exists() and not waiting.exclude(vm=c).exists():
            # time passes: c's jobs of this phase go unfetched past the wait
            type(run).objects.filter(pk=run.pk).update(
                phase_started_at=timezone.now() - timedelta(seconds=jobs.FETCH_WAIT_SECONDS + 1)
            )
        if jobs.settle(run.pk):
            break
    operation.refresh_from_db()
    assert operation.done
    assert verdicts(operation)["c"] == Verdict.NO_ANSWER
    assert verdicts(operation)["a"] == verdicts(operation)["b"] == Verdict.OK
    assert run.jobs.filter(vm=c, status=ValidationJob.Status.NO_ANSWER).exists()


def test_validation_needs_a_running_cluster_two_running_members_and_update(world):
    cluster = running_cluster(world, ["a", "b"])
    VirtualMachine.objects.filter(name="b").update(status=VmStatus.STOPPED)
    with pytest.raises(errors.RuleViolation) as refused:
        operations.start_validation(cluster.pk, actor=world.admin)
    assert refused.value.code == "not_enough_running_members"
    VirtualMachine.objects.filter(name="b").update(status=VmStatus.RUNNING)
    with pytest.raises(errors.PermissionRequired):
        operations.start_validation(cluster.pk, actor=world.users["viewer"])
    with pytest.raises(errors.InvalidInput):
        operations.start_validation(cluster.pk, actor=world.admin, level="3")
    cluster.status = ClusterStatus.TERMINATED
    cluster.save()
    with pytest.raises(errors.RuleViolation) as refused:
        operations.start_validation(cluster.pk, actor=world.admin)
    assert refused.value.code == "validation_cluster_not_running"  # it says why
    assert not Operation.objects.filter(kind=Operation.Kind.VALIDATE).exists()


def test_one_run_at_a_time(world, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)
    cluster = running_cluster(world, ["a", "b"])
    operations.start_validation(cluster.pk, actor=world.admin)
    with pytest.raises(errors.RuleViolation) as refused:
        operations.start_validation(cluster.pk, actor=world.admin)
    assert refused.value.code == "validation_running"


def test_claim_hands_out_only_the_current_phase(world, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)
    cluster = running_cluster(world, ["a", "b"])
    operations.start_validation(cluster.pk, actor=world.admin)
    a = VirtualMachine.objects.get(name="a")
    assert [job.kind for job in jobs.claim(a.pk)] == ["gpu"]
    assert jobs.claim(a.pk) == []  # fetched once


def test_the_operations_beat_does_not_cut_a_run_short(world, monkeypatch):
    """``fanout.watch_stale`` (every 30 s in production) settles every open Operation by the
    rules of the kinds it knows; a validation must go on until its agents have answered."""
    from clusters.operations.fanout import watch_stale
    from clusters.validation import agent_sim as validation_sim

    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)
    cluster = running_cluster(world, ["a", "b"])
    operation = operations.start_validation(cluster.pk, actor=world.admin)
    watch_stale()
    run = operation.validation
    for _round in range(10):
        for vm in VirtualMachine.objects.filter(name__in="ab"):
            for job in jobs.claim(vm.pk):
                job = ValidationJob.objects.select_related("vm__instance_type").get(pk=job.pk)
                names = dict(VirtualMachine.objects.values_list("pk", "name"))
                answer = validation_sim.outputs_for(job, names, roce=False)
                jobs.record(vm.pk, {"job": job.pk, **answer})
        watch_stale()
    run.refresh_from_db()
    operation.refresh_from_db()
    assert verdicts(operation) == {"a": Verdict.OK, "b": Verdict.OK}
    assert run.finished_at is not None and operation.done
