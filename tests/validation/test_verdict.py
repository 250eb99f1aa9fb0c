"""The verdict rules as a table: 정상, 점검 필요 (within 10 % below, or a correctable-error
trend), 불량 (failed diag, missing GPU, far below, link down), 응답 없음."""

import pytest
from django.utils import translation

from clusters.models.validation import ValidationJob, Verdict
from clusters.validation import verdict

T = {
    "ports": 8,
    "port_gbps": 400,
    "intra_busbw_gbs": 460.0,
    "multi_busbw_gbs": 440.0,
    "ib_write_bw_gbps": 375.0,
    "margin_percent": 10,
}
DEVICES = [f"mlx5_{i}" for i in range(8)]
OK, WARN, BAD, NONE = Verdict.OK, Verdict.WARN, Verdict.BAD, Verdict.NO_ANSWER


def members(n):
    return [{"id": i, "name": f"n{i}", "gpus": 8} for i in range(n)]


def gpu_job(vm, count=8, failed=(), warned=(), status=ValidationJob.Status.DONE):
    def test(name, gpus, state):
        return {"name": name, "gpus": list(gpus), "status": state, "warnings": ["why"]}

    return {
        "kind": ValidationJob.Kind.GPU,
        "vm": vm,
        "peers": [],
        "status": status,
        "timeout": 300,
        "figures": {
            "gpu_list": {"count": count, "gpus": [{"index": i} for i in range(count)]},
            "diag": {
                "failed": [test("memory", g, "fail") for g in failed],
                "warned": [test("pcie", g, "warn") for g in warned],
            },
        },
    }


def nccl(kind, vm, busbw, peers=(), wrong=0, status=ValidationJob.Status.DONE):
    return {
        "kind": kind,
        "vm": vm,
        "peers": list(peers),
        "status": status,
        "timeout": 300,
        "figures": {"nccl": {"busbw_gbs": busbw, "wrong": wrong}},
    }


def ib(client, server, gbps=None, state="ACTIVE", symbol=(0, 0), downed=(0, 0)):
    gbps = gbps or {}

    def port(i, when):
        return {
            "state": state if i == 5 else "ACTIVE",
            "symbol_error": symbol[when] if i == 5 else 0,
            "link_downed": downed[when] if i == 5 else 0,
        }

    return {
        "kind": ValidationJob.Kind.IB_CLIENT,
        "vm": client,
        "peers": [server],
        "status": ValidationJob.Status.DONE,
        "timeout": 120,
        "figures": {
            "devices": DEVICES,
            "bw": {d: {"average_gbps": gbps.get(i, 391.0)} for i, d in enumerate(DEVICES)},
            "ports_before": {"ports": {f"{d}/1": port(i, 0) for i, d in enumerate(DEVICES)}},
            "ports_after": {"ports": {f"{d}/1": port(i, 1) for i, d in enumerate(DEVICES)}},
        },
    }


def invented(job, device, gbps=10.0):
    """``job`` with one more port, ``device``, measured at ``gbps`` (an agent's say-so)."""
    figures = job["figures"]
    bw = {**figures["bw"], device: {"average_gbps": gbps}}
    return {**job, "figures": {**figures, "devices": [*figures["devices"], device], "bw": bw}}


def ring(n, slow=None, gbps=150.0):
    """ib_write_bw jobs round a ring; ``slow`` member's port 5 measures ``gbps``."""
    return [ib(i, (i + 1) % n, {5: gbps} if slow in (i, (i + 1) % n) else None) for i in range(n)]


CASES = [
    # (what, jobs, member count, expected verdicts, codes of member 0's reasons)
    (
        "all good",
        [gpu_job(0), gpu_job(1), nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 463.4)],
        2,
        [OK, OK],
        [],
    ),
    ("exactly at threshold", [nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 460.0)], 2, [OK, OK], []),
    (
        "local busbw 5% low",
        [nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 437.0)],
        2,
        [WARN, OK],
        ["nccl_local_low"],
    ),
    (
        "local busbw 10% low is still 점검",
        [nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 414.0)],
        2,
        [WARN, OK],
        ["nccl_local_low"],
    ),
    (
        "local busbw 11% low",
        [nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 409.0)],
        2,
        [BAD, OK],
        ["nccl_local_low"],
    ),
    (
        "wrong values",
        [nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 463.0, wrong=2)],
        2,
        [BAD, OK],
        ["nccl_wrong"],
    ),
    ("failed diag", [gpu_job(0, failed=[[3]])], 2, [BAD, OK], ["diag_failed"]),
    ("diag warning", [gpu_job(0, warned=[[1]])], 2, [WARN, OK], ["diag_warned"]),
    ("missing GPU", [gpu_job(0, count=7)], 2, [BAD, OK], ["gpu_missing"]),
    (
        "no answer",
        [gpu_job(0, status=ValidationJob.Status.NO_ANSWER)],
        2,
        [NONE, OK],
        ["no_answer"],
    ),
    (
        "a skipped job judges nothing",
        [{**ib(0, 1), "status": ValidationJob.Status.SKIPPED, "figures": {}}],
        2,
        [OK, OK],
        [],
    ),
    (
        "tool failed",
        [
            {
                **nccl(ValidationJob.Kind.NCCL_LOCAL, 0, 0),
                "status": ValidationJob.Status.FAILED,
                "figures": {"error": "exit 1"},
            }
        ],
        2,
        [BAD, OK],
        ["tool_failed"],
    ),
    ("link down", [ib(0, 1, state="DOWN")], 2, [BAD, OK], ["port_down"]),
    ("link went down", [ib(0, 1, downed=(0, 2))], 2, [BAD, OK], ["link_downed"]),
    ("symbol errors grow", [ib(0, 1, symbol=(10, 250))], 2, [WARN, OK], ["symbol_errors"]),
    ("ring straggler port", ring(4, slow=2), 4, [OK, OK, BAD, OK], []),
    (
        "a port missing",
        [{**ib(0, 1), "figures": {**ib(0, 1)["figures"], "devices": DEVICES[:7]}}],
        2,
        [BAD, OK],
        ["ports_missing"],
    ),
    ("ring straggler port, 7% low", ring(4, slow=2, gbps=350.0), 4, [OK, OK, WARN, OK], []),
    (
        "an invented port of a neighbour judges only the member that reported it",
        ring(4)[1:] + [invented(ib(0, 1), "mlx5_frame")],
        4,
        [BAD, OK, OK, OK],
        ["ib_low"],
    ),
    (
        "a neighbour's real port reported low, its own measurements fine",
        ring(4)[1:] + [invented(ib(0, 1), "mlx5_3")],
        4,
        [OK, OK, OK, OK],
        [],
    ),
    (
        "a peer that measured nothing itself is judged by nobody else's figure",
        [ib(0, 1, {5: 10.0})],
        2,
        [BAD, OK],
        ["ib_low"],
    ),
    (
        "two members share a low pair",
        [nccl(ValidationJob.Kind.NCCL_PAIR, 0, 300.0, peers=[1])],
        2,
        [BAD, BAD],
        ["nccl_pair_low"],
    ),
    (
        "ring pair straggler",
        [
            nccl(
                ValidationJob.Kind.NCCL_PAIR,
                i,
                230.0 if 2 in (i, (i + 1) % 4) else 445.0,
                peers=[(i + 1) % 4],
            )
            for i in range(4)
        ]
        + [nccl(ValidationJob.Kind.NCCL_ALL, 0, 231.0, peers=[1, 2, 3])],
        4,
        [OK, OK, BAD, OK],
        [],
    ),
    (
        "all-nodes low, nobody singled out",
        [nccl(ValidationJob.Kind.NCCL_ALL, 0, 300.0, peers=[1, 2])],
        3,
        [WARN, WARN, WARN],
        ["nccl_all_low"],
    ),
]


@pytest.mark.parametrize(
    ("what", "jobs", "n", "expected", "codes"), CASES, ids=[c[0] for c in CASES]
)
def test_verdicts(what, jobs, n, expected, codes):
    result = verdict.judge(members(n), jobs, T, level=1)
    assert [result[i][0] for i in range(n)] == expected
    assert [r["code"] for r in result[0][1]] == codes


def test_the_straggler_reasons_name_gpu_5_its_port_and_the_figures():
    jobs = ring(4, slow=2) + [
        nccl(
            ValidationJob.Kind.NCCL_PAIR,
            i,
            230.5 if 2 in (i, (i + 1) % 4) else 445.0,
            peers=[(i + 1) % 4],
        )
        for i in range(4)
    ]
    _verdict, reasons = verdict.judge(members(4), jobs, T, level=2)[2]
    with translation.override("ko"):
        texts = [verdict.reason_text(r) for r in reasons]
    assert any("mlx5_5" in t and "GPU 5" in t and "150.0 Gb/s" in t and "375" in t for t in texts)
    assert any("2노드" in t and "230.5 GB/s" in t and "440" in t for t in texts), texts
    with translation.override("en"):
        assert all(verdict.reason_text(r) for r in reasons)


@pytest.mark.parametrize(("value", "level"), [(375.0, OK), (338.0, WARN), (337.4, BAD)])
def test_figure_level_margin(value, level):
    assert verdict.figure_level(value, 375.0, 10) == level


# ---------------------------------------------------------------------------------------------
# Members without GPUs on a soft fabric: the cluster's own baseline

BASELINE = {
    "pairs": [
        {"client": 0, "server": 1, "gbps": 9.5},
        {"client": 1, "server": 0, "gbps": 9.4},
    ],
    "allreduce_busbw_gbs": 0.55,
}
SOFT = {
    **T,
    "ports": 1,
    "soft_fabric": True,
    "mpi_allreduce": True,
    "generation": 1,
    "baseline_percent": 70,
    "baseline": BASELINE,
}


def soft_ib(client, server, gbps=9.5):
    bw = {"average_gbps": gbps} if gbps is not None else {"error": "no result row"}
    return {
        "kind": ValidationJob.Kind.IB_CLIENT,
        "vm": client,
        "peers": [server],
        "status": ValidationJob.Status.DONE,
        "timeout": 180,
        "figures": {"devices": ["rxe0"], "bw": {"rxe0": bw}},
    }


def skipped_gpu(vm):
    return {
        "kind": ValidationJob.Kind.GPU,
        "vm": vm,
        "peers": [],
        "status": ValidationJob.Status.SKIPPED,
        "timeout": 120,
        "figures": {"skipped": "no_gpus"},
    }


def mpi_all(busbw):
    return {
        **nccl(ValidationJob.Kind.NCCL_ALL, 0, busbw, peers=[1]),
        "figures": {"nccl": {"busbw_gbs": busbw, "wrong": 0, "runner": "mpi"}},
    }


def soft_judge(jobs, thresholds=SOFT, n=2):
    return verdict.judge(members(n), jobs, thresholds, 1)


def test_a_gpu_step_skipped_for_lack_of_gpus_says_so_and_weighs_nothing():
    out = soft_judge([skipped_gpu(0), skipped_gpu(1), soft_ib(0, 1), soft_ib(1, 0)])
    assert [level for level, _reasons in out.values()] == [OK, OK]
    with translation.override("ko"):
        assert [verdict.reason_text(r) for r in out[0][1]] == ["GPU 진단: 건너뜀 — GPU 없음"]
    with translation.override("en"):
        assert "GPU" in verdict.reason_text(out[0][1][0])


def test_a_pair_below_its_baseline_is_bad_naming_both_members_and_the_direction():
    out = soft_judge([soft_ib(0, 1, gbps=6.0), soft_ib(1, 0, gbps=9.3)])  # 63 % of 9.5
    assert out[0][0] == BAD and out[1][0] == BAD  # one figure cannot tell which end is slow
    with translation.override("ko"):
        text = verdict.reason_text(out[0][1][0])
    assert text == ("ib_write_bw n0 → n1: 6 Gb/s, 기준선 9.5 Gb/s의 63% (기준선의 70% 미만)")
    assert out[1][1] == out[0][1]


def test_at_the_fraction_of_its_baseline_a_pair_passes():
    out = soft_judge([soft_ib(0, 1, gbps=9.5 * 0.7), soft_ib(1, 0)])
    assert [level for level, _reasons in out.values()] == [OK, OK]


def test_in_a_ring_the_member_whose_every_pair_is_low_takes_the_blame():
    pairs = [{"client": i, "server": (i + 1) % 4, "gbps": 9.5} for i in range(4)]
    thresholds = {**SOFT, "baseline": {"pairs": pairs, "allreduce_busbw_gbs": 0.55}}
    jobs = [soft_ib(i, (i + 1) % 4, gbps=3.0 if 2 in (i, (i + 1) % 4) else 9.4) for i in range(4)]
    out = soft_judge(jobs, thresholds, n=4)
    assert [out[i][0] for i in range(4)] == [OK, OK, BAD, OK]
    assert [r["params"]["client"] for r in out[2][1]] == ["n1", "n2"]


def test_the_mpi_all_reduce_below_its_baseline_and_a_failed_pair():
    out = soft_judge([soft_ib(0, 1), soft_ib(1, 0), mpi_all(0.3)])
    assert [level for level, _r in out.values()] == [WARN, WARN]  # nobody to blame: 점검 필요
    assert out[0][1][0]["code"] == "allreduce_below_baseline"
    out = soft_judge([soft_ib(0, 1, gbps=None), soft_ib(1, 0), mpi_all(0.3)])
    codes = sorted(r["code"] for r in out[0][1])
    assert out[0][0] == BAD and codes == ["allreduce_below_baseline", "ib_pair_failed"]


def test_without_a_baseline_yet_the_figures_are_recorded_not_judged():
    thresholds = {**SOFT, "baseline": None}
    out = soft_judge([soft_ib(0, 1, gbps=0.5), soft_ib(1, 0, gbps=0.4), mpi_all(0.01)], thresholds)
    assert [level for level, _r in out.values()] == [OK, OK]


def test_a_soft_fabric_is_never_held_to_the_catalog_and_real_hcas_always_are():
    out = soft_judge([soft_ib(0, 1, gbps=9.4), soft_ib(1, 0, gbps=9.4)])
    assert [level for level, _r in out.values()] == [OK, OK]  # 9.4 Gb/s against 375: fine here
    catalog = verdict.judge(members(2), [ib(0, 1, {5: 9.4}), ib(1, 0, {5: 9.4})], T, 1)
    assert [level for level, _r in catalog.values()] == [BAD, BAD]


@pytest.mark.parametrize("baseline", [None, "recorded"])
def test_a_pair_that_moved_nothing_is_bad_with_or_without_a_baseline(baseline):
    """A link that carried nothing while measured (0 Gb/s) is broken — on the start's first
    run too, where it would otherwise become a baseline of 0 that nothing can fall below."""
    thresholds = SOFT if baseline else {**SOFT, "baseline": None}
    out = soft_judge([soft_ib(0, 1, gbps=0.0), soft_ib(1, 0)], thresholds)
    assert [level for level, _r in out.values()] == [BAD, BAD]  # a pair of two: both named
    (reason,) = [r for r in out[0][1] if r["code"] == "ib_pair_idle"]
    with translation.override("ko"):
        assert verdict.reason_text(reason) == (
            "ib_write_bw n0 → n1: 측정하는 동안 옮긴 데이터가 없습니다 (0 Gb/s)"
        )
