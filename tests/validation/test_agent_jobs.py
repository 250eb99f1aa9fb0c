"""The agent's job round trip on the live test server: each member's agent fetches its jobs
with its metrics token, runs the tools (stand-ins on PATH that print the real tools' output)
through subprocess, posts the raw output, and the portal parses, judges and finishes the
run. Plus the endpoints' refusals."""

import json
import os
import stat
from pathlib import Path

import pytest
import requests

from clusters import operations, services
from clusters.models import ClusterStatus, ValidationJob
from clusters.models.validation import Verdict
from clusters.validation.verdict import reason_text
from metrics import services as metrics_services
from metrics.vm_agent import jobs as agent_jobs
from portal.compute.backends.simulator import SimulatorBackend
from vms.models import VirtualMachine, VmStatus

FIXTURES = Path(__file__).parent / "fixtures"
GPUS = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d}-aaaa)\n" for i in range(8))


def stub(bin_dir, name, text):
    path = bin_dir / name
    (bin_dir / f"{name}.out").write_text(text)
    path.write_text(f"#!/bin/sh\ncat '{bin_dir / (name + '.out')}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def tools(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub(bin_dir, "nvidia-smi", GPUS)
    stub(bin_dir, "dcgmi", (FIXTURES / "dcgmi_diag_r1_v3_pass.json").read_text())
    stub(bin_dir, "ib_write_bw", (FIXTURES / "ib_write_bw_ndr.txt").read_text())
    nccl = (FIXTURES / "all_reduce_perf_2node.txt").read_text()
    stub(bin_dir, "all_reduce_perf", nccl)
    stub(bin_dir, "mpirun", nccl)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    root = tmp_path / "infiniband"
    for i in range(8):
        port = root / f"mlx5_{i}" / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        (port / "state").write_text("4: ACTIVE\n")
        (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
        (port / "counters" / "symbol_error").write_text("0\n")
        (port / "counters" / "link_downed").write_text("0\n")
    return root


@pytest.fixture
def running_pair(world, monkeypatch):
    monkeypatch.setattr(SimulatorBackend, "emits_metrics", False)  # real agents answer
    world.capacity(8)
    cluster = world.cluster("pair")
    vms = [world.vm(n, private_ip=f"10.0.0.{i + 5}") for i, n in enumerate(["a", "b"])]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    tokens = {vm.name: metrics_services.rotate_token(vm.pk, actor=world.admin)[1] for vm in vms}
    return cluster, tokens


@pytest.mark.django_db(transaction=True)
def poll_until_done(runners, operation, rounds=12):
    """Each agent polls once a round (its jobs run in threads) until the run is done."""
    for _round in range(rounds):
        for thread in [thread for runner in runners for thread in runner.poll_once()]:
            thread.join(30)
        operation.refresh_from_db()
        if operation.done:
            break
    assert operation.done


def test_agents_fetch_run_and_post_until_the_run_is_judged(world, live_server, tools, running_pair):
    cluster, tokens = running_pair
    operation = operations.start_validation(cluster.pk, actor=world.admin)
    url = f"{live_server.url}/api/metrics/ingest"
    runners = [agent_jobs.JobRunner(url, t, infiniband_root=tools) for t in tokens.values()]
    poll_until_done(runners, operation)
    run = operation.validation
    assert set(run.jobs.values_list("status", flat=True)) == {ValidationJob.Status.DONE}
    ib = run.jobs.get(kind="ib_client", vm_name="a")
    assert ib.figures["bw"]["mlx5_3"]["average_gbps"] == 391.74
    assert ib.raw[0]["tool"] == "ports" and "ACTIVE" in ib.raw[0]["stdout"]
    # 445.07 GB/s in-node is within 10 % of 460: 점검 필요, with the figure as its reason.
    verdicts = {v.vm_name: (v.verdict, [r["code"] for r in v.reasons]) for v in run.verdicts.all()}
    assert verdicts == {
        "a": (Verdict.WARN, ["nccl_local_low"]),
        "b": (Verdict.WARN, ["nccl_local_low"]),
    }


@pytest.mark.django_db(transaction=True)
def test_members_without_the_tools_are_judged_to_need_a_look_naming_them(
    world, live_server, running_pair, tmp_path, monkeypatch
):
    """A guest with no GPU software (no nvidia-smi, dcgmi, perftest, nccl-tests, mpirun, no
    InfiniBand devices): every job answers, and each member is 점검 필요 saying what is not
    installed — not 응답 없음 (its agent did answer) and not 불량 (nothing was measured)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    cluster, tokens = running_pair
    operation = operations.start_validation(cluster.pk, actor=world.admin)
    url = f"{live_server.url}/api/metrics/ingest"
    runners = [
        agent_jobs.JobRunner(url, t, infiniband_root=tmp_path / "no-ib") for t in tokens.values()
    ]
    poll_until_done(runners, operation)
    run = operation.validation
    assert set(run.jobs.values_list("status", flat=True)) == {ValidationJob.Status.DONE}
    for verdict in run.verdicts.all():
        assert verdict.verdict == Verdict.WARN
        assert [r["code"] for r in verdict.reasons] == ["tools_missing"]
        assert reason_text(verdict.reasons[0]) == (
            "nvidia-smi/dcgmi/ib_write_bw/all_reduce_perf가 설치되어 있지 않습니다"
        )


@pytest.mark.django_db(transaction=True)
def test_job_endpoints_refuse_bad_tokens_other_vms_jobs_and_bad_bodies(
    world, live_server, running_pair
):
    cluster, tokens = running_pair
    operations.start_validation(cluster.pk, actor=world.admin)
    base = f"{live_server.url}/api/metrics/jobs"

    def post(path, token, body):
        return requests.post(
            f"{base}/{path}",
            data=json.dumps(body),
            timeout=10,
            headers={"Authorization": f"Bearer {token}"},
        )

    assert post("next", "vcm_made-up", {}).status_code == 401
    (job,) = post("next", tokens["a"], {}).json()["jobs"]
    assert job["kind"] == "gpu" and job["params"] == {"level": 1}
    good = {"job": job["id"], "outputs": [{"tool": "nvidia-smi", "stdout": GPUS, "exit_code": 0}]}
    assert post("result", tokens["b"], good).status_code == 404
    jid = job["id"]
    for bad in (
        {"outputs": good["outputs"]},
        {**good, "job": str(jid)},
        {"job": jid},
        {"job": jid, "outputs": "x"},
        {"job": jid, "outputs": [{"tool": "rm", "stdout": "", "exit_code": 0}]},
        {"job": jid, "outputs": [{"tool": "dcgmi", "stdout": 5, "exit_code": 0}]},
        {"job": jid, "outputs": [{"tool": "dcgmi", "stdout": "", "exit_code": "0"}]},
    ):
        response = post("result", tokens["a"], bad)
        assert response.status_code == 400, bad
        assert response.json()["code"] == "invalid"
    assert post("result", tokens["a"], good).json() == {"status": "DONE"}
    assert post("result", tokens["a"], good).status_code == 409
    assert VirtualMachine.objects.get(name="a").status == VmStatus.RUNNING


def test_the_commands_the_agent_runs():
    ib = {"base_port": 18515, "bytes": 1048576, "seconds": 5, "gid_index": 3}
    assert agent_jobs._ib_argv(ib, "mlx5_5", 5, "10.0.0.7") == [
        "ib_write_bw",
        "-d",
        "mlx5_5",
        "-p",
        "18520",
        "-s",
        "1048576",
        "-D",
        "5",
        "-F",
        "--report_gbits",
        "-x",
        "3",
        "10.0.0.7",
    ]
    nccl = {
        "gpus": 8,
        "hosts": ["10.0.0.5", "10.0.0.6"],
        "args": ["-b", "512M"],
        "env": {"NCCL_IB_HCA": "mlx5"},
    }
    assert agent_jobs._mpirun(nccl, "all_reduce_perf") == [
        "mpirun",
        "-np",
        "16",
        "-H",
        "10.0.0.5:8,10.0.0.6:8",
        "--bind-to",
        "none",
        "-x",
        "NCCL_IB_HCA=mlx5",
        "all_reduce_perf",
        "-b",
        "512M",
        "-g",
        "1",
    ]


def test_a_missing_tool_and_a_hung_tool_are_reported_not_guessed(tmp_path):
    missing = agent_jobs.run_tool("dcgmi", [str(tmp_path / "no-such-dcgmi")], 5)
    assert missing["exit_code"] == agent_jobs.NOT_FOUND
    hung = agent_jobs.run_tool("dcgmi", ["sleep", "5"], 1)
    assert hung["exit_code"] == agent_jobs.TIMED_OUT and "timed out" in hung["stdout"]
