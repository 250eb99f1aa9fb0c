"""What a member's agent posts to the job endpoints can never break the portal, on
PostgreSQL: NUL bytes, infinite and 26-digit numbers in a tool's output are "could not
parse" kept with their raw text (never a 500), a stored row no JSON reader could take never
fails a read of the validation history, and the endpoints are rate limited per token."""

import json

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from clusters import operations
from clusters.models import ValidationJob
from clusters.models.validation import ValidationVerdict, Verdict
from tests.api.test_cli import vc  # noqa: F401 - a fixture
from tests.validation.test_agent_jobs import running_pair  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db
BANNER = "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"
NCCL_ROW = "  {size} 2048 float sum -1 1.0 {bw} {bw} 0 1.0 {bw} {bw} 0\n"
GPUS = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n"


@pytest.fixture
def run(world, running_pair):  # noqa: F811 - the fixture imported above
    """A validation started on a running pair whose agents (the test) answer themselves:
    (cluster, {name: token}, {name: its open gpu job})."""
    cluster, tokens = running_pair
    operations.start_validation(cluster.pk, actor=world.admin)
    jobs = {job.vm_name: job for job in ValidationJob.objects.filter(kind="gpu")}
    return cluster, tokens, jobs


def post_result(token, job, outputs):
    ValidationJob.objects.filter(pk=job.pk).update(status=ValidationJob.Status.RUNNING)
    body = {"job": job.pk, "outputs": outputs, "seconds": 1.0}
    return Client().post(
        "/api/metrics/jobs/result",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def out(tool, stdout, **extra):
    return {"tool": tool, "stdout": stdout, "exit_code": 0, **extra}


HOSTILE = {
    "nul in all_reduce_perf": [out("all_reduce_perf", NCCL_ROW.format(size=1024, bw="1\x00"))],
    "nul in ib_write_bw": [
        out(
            "ib_write_bw",
            "Device : mlx5_\x000\n" + BANNER + " 65536 5000 1\x00 1 1\n",
            device="mlx5_\x000",
        )
    ],
    "infinite all_reduce_perf": [out("all_reduce_perf", NCCL_ROW.format(size=1024, bw="9" * 400))],
    "infinite ib_write_bw": [
        out("ib_write_bw", BANNER + f" 65536 5000 {'9' * 400} {'9' * 400} 1.0\n")
    ],
    "26-digit message size": [out("all_reduce_perf", NCCL_ROW.format(size="9" * 26, bw="400.0"))],
    "dcgmi of the wrong types": [
        out("nvidia-smi", GPUS),
        out(
            "dcgmi",
            '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": '
            '[{"gpu_ids": "\u00b2", "status": 5}]}]}]}}',
        ),
    ],
    "deep dcgmi": [out("dcgmi", '{"x": ' + "[" * 50_000 + "]" * 50_000 + "}")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_output_is_kept_as_could_not_parse(run, case):
    _cluster, tokens, jobs = run
    response = post_result(tokens["a"], jobs["a"], HOSTILE[case])
    assert response.status_code == 200, response.content
    job = ValidationJob.objects.get(pk=jobs["a"].pk)
    stored = json.dumps(job.raw)
    assert "\\u0000" not in stored and "\x00" not in stored
    assert [o["stdout"] for o in job.raw] == [
        o["stdout"].replace("\x00", "\ufffd") for o in HOSTILE[case]
    ]
    unreadable = [
        figures.get("error")
        for figures in (
            job.figures.get("nccl"),
            job.figures.get("diag"),
            *(job.figures.get("bw") or {}).values(),
        )
        if figures
    ]
    assert unreadable and all(unreadable), job.figures  # "could not parse", with why


def test_a_stored_figure_past_64_bits_never_fails_a_read(run, api, secrets, login):
    """Rows written before figures were bounded (or by anything else) still read: the
    API answers 200 with such a value as null, the console shows the run."""
    cluster, _tokens, jobs = run
    ValidationJob.objects.filter(pk=jobs["a"].pk).update(
        status=ValidationJob.Status.DONE,
        figures={"nccl": {"bytes": 10**25, "busbw_gbs": "fast", "wrong": 10**30}},
    )
    ValidationVerdict.objects.create(
        run=jobs["a"].run,
        vm_id=jobs["a"].vm_id,
        vm_name="a",
        verdict=Verdict.BAD,
        reasons=[
            {"code": "nccl_wrong", "level": "BAD", "params": {"wrong": 10**40}},
            {"code": "ib_low", "level": "BAD", "params": {"value": "x"}},
        ],
    )
    response = api.get(
        f"/virtual-clusters/{cluster.pk}/validations?include_raw=true", token=secrets["viewer"]
    )
    assert response.status_code == 200, response.content
    (item,) = response.json()["items"]
    check = next(c for c in item["checks"] if c["id"] == jobs["a"].pk)
    assert check["figures"]["nccl"]["bytes"] is None and check["figures"]["nccl"]["wrong"] is None
    (verdict,) = item["verdicts"]
    assert verdict["reasons"][0]["params"]["wrong"] is None
    assert verdict["reasons"][1]["message"] == "ib_low"  # its params do not fit its words
    page = login("viewer").get(reverse("clusters:validation_section", args=[cluster.pk]))
    assert page.status_code == 200


def test_the_job_endpoints_are_rate_limited_per_token(run, settings):
    """Both job endpoints count against one window per token, apart from ingest's; a
    made-up token is a 401 however often it is sent, and takes no counter."""
    cache.clear()
    settings.METRICS_JOBS_RATE_PER_MINUTE = 3
    _cluster, tokens, jobs = run

    def poll(token):
        return Client().post("/api/metrics/jobs/next", headers={"Authorization": f"Bearer {token}"})

    assert [poll("vcm_made-up").status_code for _ in range(5)] == [401] * 5
    assert [poll(tokens["a"]).status_code for _ in range(2)] == [200, 200]
    assert post_result(tokens["a"], jobs["a"], [out("nvidia-smi", GPUS)]).status_code == 200
    refused = poll(tokens["a"])
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) <= 60
    assert post_result(tokens["a"], jobs["a"], [out("nvidia-smi", GPUS)]).status_code == 429
    assert poll(tokens["b"]).status_code == 200  # another VM's token has its own budget


@pytest.mark.django_db(transaction=True)
def test_vc_reads_a_history_holding_a_figure_past_64_bits(vc, run):  # noqa: F811
    cluster, _tokens, jobs = run
    figures = {"nccl": {"bytes": 10**25, "busbw_gbs": 400.0}}
    ValidationJob.objects.filter(pk=jobs["a"].pk).update(figures=figures)
    code, out, err = vc("cluster", "validations", cluster.name)
    assert code == 0, err
    assert len(out.splitlines()) == 2  # the header and the run
