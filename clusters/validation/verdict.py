"""A member's verdict from its run's figures: 정상, 점검 필요 (a figure
below its threshold but within the margin, or a correctable-error trend), 불량 (a failed
diag, a missing GPU, a figure far below, a link down), 응답 없음 (its agent did not answer).
A member without the tools (a guest with no GPU software) is 점검 필요 and says which are
missing, nothing else being measured there.

Pure functions over plain data (what ``clusters.validation.jobs`` stores), so the rules are
tested as a table. Each reason is ``{"code", "level", "params"}``; ``reason_text`` puts it in
words in the reader's language. A figure measured between two members (an ``ib_write_bw``
port, a 2-node all-reduce) is held against a member only when every such measurement it
took part in is low: in a ring each member is in two, so a straggler fails both of its own
and its neighbours pass their other one. A member's ports are those its own agent reported
and measured (the devices of its own ``ib_write_bw`` job): a neighbour's figure about any
other port counts for nothing, so one agent cannot get a healthy neighbour judged 불량 with
an invented port, and about one of them it counts only if the member's own is low too.

A step planned as skipped on a member without GPUs (``figures["skipped"]``) says so in the
member's reasons (건너뜀 — GPU 없음) and weighs nothing: the member is judged on the rest.
Where the run's thresholds hold a soft fabric or an MPI all-reduce to the cluster's own
baseline (``clusters.validation.baseline``), a ring pair's ``ib_write_bw`` below its
percentage of the pair's baseline is 불량, naming the client and the server: held against
the member whose every pair is low when there is one, else against both of the pair; the
all-reduce below its baseline is held as the whole cluster's figure is. Without a baseline
yet (the start's first run) those figures are recorded, and only a failure counts — a pair
that moved nothing (0 Gb/s) is one, whatever the baseline.
"""

import re

from django.utils.translation import gettext_lazy as _

from clusters.models.validation import ValidationJob, Verdict
from clusters.validation.baseline import pair_figure

Kind, JobStatus = ValidationJob.Kind, ValidationJob.Status
SEVERITY = {Verdict.OK: 0, Verdict.WARN: 1, Verdict.NO_ANSWER: 2, Verdict.BAD: 3}

REASONS = {
    "no_answer": _("%(check)s: 에이전트가 %(seconds)d초 안에 응답하지 않았습니다"),
    "tool_failed": _("%(check)s 실행 실패: %(detail)s"),
    "diag_failed": _("dcgmi diag -r %(r)s: %(test)s 실패 (GPU %(gpus)s) %(detail)s"),
    "diag_warned": _("dcgmi diag -r %(r)s: %(test)s 경고 (GPU %(gpus)s) %(detail)s"),
    "gpu_missing": _(
        "GPU %(found)d개만 보입니다 (인스턴스 유형 %(expected)d개, 없는 GPU: %(missing)s)"
    ),
    "port_down": _("%(port)s (GPU %(gpu)s) 링크 다운: 상태 %(state)s"),
    "link_downed": _("%(port)s (GPU %(gpu)s): 검사 중 링크가 %(delta)d회 끊겼습니다"),
    "symbol_errors": _("%(port)s (GPU %(gpu)s): 심볼 오류 %(delta)d건 증가 (정정 가능 오류 추세)"),
    "ib_low": _(
        "ib_write_bw %(port)s (GPU %(gpu)s, %(peer)s와): %(value).1f Gb/s, "
        "기준 %(threshold).0f Gb/s의 %(percent).0f%%"
    ),
    "ports_missing": _("패브릭 포트가 %(found)d개만 보입니다 (기준 %(expected)d개)"),
    "ib_failed": _("ib_write_bw %(port)s (GPU %(gpu)s, %(peer)s와) 측정 실패: %(detail)s"),
    "nccl_local_low": _(
        "노드 내 all_reduce_perf busbw %(value).1f GB/s, "
        "기준 %(threshold).0f GB/s의 %(percent).0f%%"
    ),
    "nccl_pair_low": _(
        "2노드 all_reduce_perf (%(peer)s와) busbw %(value).1f GB/s, "
        "기준 %(threshold).0f GB/s의 %(percent).0f%%"
    ),
    "nccl_all_low": _(
        "전체 %(nodes)d노드 all_reduce_perf busbw %(value).1f GB/s, "
        "기준 %(threshold).0f GB/s의 %(percent).0f%%"
    ),
    "nccl_wrong": _("all_reduce_perf: 결과 값 오류 %(wrong)d건"),
    "tools_missing": _("%(tools)s가 설치되어 있지 않습니다"),
    "skipped_no_gpus": _("%(check)s: 건너뜀 — GPU 없음"),
    "ib_below_baseline": _(
        "ib_write_bw %(client)s → %(server)s: %(value).3g Gb/s, 기준선 %(baseline).3g Gb/s의 "
        "%(percent).0f%% (기준선의 %(fraction).0f%% 미만)"
    ),
    "ib_pair_failed": _("ib_write_bw %(client)s → %(server)s 측정 실패: %(detail)s"),
    "ib_pair_idle": _(
        "ib_write_bw %(client)s → %(server)s: 측정하는 동안 옮긴 데이터가 없습니다 (0 Gb/s)"
    ),
    "allreduce_below_baseline": _(
        "전체 %(nodes)d노드 MPI all-reduce busbw %(value).3g GB/s, 기준선 %(baseline).3g GB/s의 "
        "%(percent).0f%% (기준선의 %(fraction).0f%% 미만)"
    ),
}
# The tools in the order a run uses them (how a member missing several names them), and
# how a tool is named when it is not what is installed (the agent's all-reduce needs MPI).
TOOLS = ("nvidia-smi", "dcgmi", "ib_write_bw", "all_reduce_perf", "allreduce")
TOOL_NAMES = {"allreduce": "mpirun+mpi4py"}


def reason_text(reason: dict) -> str:
    """A stored reason in words; one whose params do not fit its message (a row written by
    other code, a figure of the wrong type) reads as its code, never an error."""
    text = REASONS.get(str(reason.get("code")))
    try:
        return str(text) % reason.get("params", {}) if text else str(reason.get("code", ""))
    except (TypeError, ValueError, KeyError, OverflowError):
        return str(reason.get("code", ""))


def reason(code: str, level: str, **params) -> dict:
    return {"code": code, "level": level, "params": params}


def figure_level(value: float, threshold: float, margin_percent: float) -> str:
    """정상 at or above the threshold, 점검 필요 within the margin below it, else 불량."""
    if value >= threshold:
        return Verdict.OK
    if value >= threshold * (1 - margin_percent / 100):
        return Verdict.WARN
    return Verdict.BAD


def _low(code, value, threshold, margin, **params):
    level = figure_level(value, threshold, margin)
    if level == Verdict.OK:
        return None
    percent = 100.0 * value / threshold if threshold else 0.0
    return reason(code, level, value=value, threshold=threshold, percent=percent, **params)


def rail(device: str, devices: list[str]) -> int | str:
    """The GPU a port serves: on a rail-optimised node (one NIC per GPU), the port's place
    among the node's ports (mlx5_5 → GPU 5)."""
    if device in devices:
        return devices.index(device)
    match = re.search(r"(\d+)$", device)
    return int(match.group(1)) if match else "?"


# ---------------------------------------------------------------------------------------------
# Per-member checks: each returns the reasons found in one job's figures


def gpu_reasons(figures: dict, expected_gpus: int, level: int) -> list[dict]:
    found = []
    listed = figures.get("gpu_list") or {}
    count = listed.get("count")
    if count is not None and count < expected_gpus:
        seen = {g["index"] for g in listed.get("gpus", [])}
        missing = ", ".join(str(i) for i in range(expected_gpus) if i not in seen)
        found.append(
            reason("gpu_missing", Verdict.BAD, found=count, expected=expected_gpus, missing=missing)
        )
    diag = figures.get("diag") or {}
    for key, code, verdict in (
        ("failed", "diag_failed", Verdict.BAD),
        ("warned", "diag_warned", Verdict.WARN),
    ):
        for test in diag.get(key, []):
            gpus = ", ".join(str(g) for g in test.get("gpus", [])) or "-"
            detail = "; ".join(test.get("warnings", []))[:300]
            found.append(
                reason(code, verdict, r=level, test=test.get("name", ""), gpus=gpus, detail=detail)
            )
    return found


def port_reasons(figures: dict) -> list[dict]:
    """Link state and counters read before and after ``ib_write_bw``: a port not ACTIVE or
    a link that went down is 불량; symbol errors that grew are a correctable-error trend."""
    before = (figures.get("ports_before") or {}).get("ports", {})
    after = (figures.get("ports_after") or {}).get("ports", {})
    devices = figures.get("devices", [])
    found = []
    for port, now in sorted(after.items()):
        device = port.split("/")[0]
        gpu = rail(device, devices)
        then = before.get(port, {})
        if now.get("state") != "ACTIVE":
            found.append(
                reason("port_down", Verdict.BAD, port=port, gpu=gpu, state=now.get("state") or "?")
            )
        for key, code, verdict in (
            ("link_downed", "link_downed", Verdict.BAD),
            ("symbol_error", "symbol_errors", Verdict.WARN),
        ):
            prior = then.get(key)
            delta = (now.get(key) or 0) - (now.get(key) or 0 if prior is None else prior)
            if delta > 0:
                found.append(reason(code, verdict, port=port, gpu=gpu, delta=delta))
    return found


def nccl_reason(code, figures, threshold, margin, **params) -> list[dict]:
    nccl = figures.get("nccl") or {}
    found = []
    if nccl.get("wrong"):
        found.append(reason("nccl_wrong", Verdict.BAD, wrong=nccl["wrong"]))
    if "busbw_gbs" in nccl:
        low = _low(code, nccl["busbw_gbs"], threshold, margin, **params)
        if low is not None:
            found.append(low)
    return found


# ---------------------------------------------------------------------------------------------
# The run


class _Shared:
    """Measurements taken between members, each counted for every member it involved; a
    member is blamed for a kind when all of its measurements of that kind are low."""

    def __init__(self):
        self.counts, self.lows = {}, {}

    def measured(self, key, low):
        self.counts[key] = self.counts.get(key, 0) + 1
        if low is not None:
            self.lows.setdefault(key, []).append(low)

    def blamed(self):
        for key, lows in sorted(self.lows.items(), key=str):
            if len(lows) == self.counts[key]:
                yield key, min(lows, key=lambda r: SEVERITY[r["level"]])


def _failed(job, check):
    detail = (job["figures"].get("error") or "")[:300]
    return reason("tool_failed", Verdict.BAD, check=check, detail=detail)


def own_ports(jobs: list[dict]) -> dict[int, set[str]]:
    """{member: the ports its own agent reported and measured}: the devices of its own
    ``ib_write_bw`` client jobs."""
    ports: dict = {}
    for job in jobs:
        if job["kind"] == Kind.IB_CLIENT and job["status"] not in (
            JobStatus.SKIPPED,
            JobStatus.NO_ANSWER,
        ):
            devices = (job["figures"] or {}).get("devices") or []
            ports.setdefault(job["vm"], set()).update(d for d in devices if isinstance(d, str))
    return ports


def _ib(job, names, shared, threshold, margin, owned):
    """Each port of an ``ib_write_bw`` client job, measured between its member and peer: for
    the client always (its own agent's word on its own port), for the peer only when the
    port is one the peer reported itself (``owned``)."""
    client, server = job["vm"], job["peers"][0]
    figures = job["figures"]
    devices = figures.get("devices", [])
    for device in devices:
        gpu = rail(device, devices)
        bw = (figures.get("bw") or {}).get(device) or {}
        for member, other in ((client, server), (server, client)):
            if member != client and device not in owned.get(member, ()):
                continue
            params = {"port": device, "gpu": gpu, "peer": names.get(other, "?")}
            if "average_gbps" in bw:
                low = _low("ib_low", bw["average_gbps"], threshold, margin, **params)
            else:
                detail = str(bw.get("error") or figures.get("error") or "")[:300]
                low = reason("ib_failed", Verdict.BAD, detail=detail, **params)
            shared.measured((member, device), low)


class _Run:
    """What ``judge`` gathers while it reads a run's jobs: each member's reasons, the
    measurements shared between members, the whole cluster's figure and the missing tools."""

    def __init__(self, members: list[dict], jobs: list[dict], thresholds: dict, level: int):
        self.members, self.thresholds, self.level = members, thresholds, level
        self.names = {m["id"]: m["name"] for m in members}
        self.margin = thresholds["margin_percent"]
        self.reasons: dict[int, list] = {m["id"]: [] for m in members}
        self.ports, self.pairs = _Shared(), _Shared()
        self.everyone: list = []
        self.missing: dict = {}
        self.owned = own_ports(jobs)
        # The cluster's own baseline (soft fabric, MPI all-reduce) and its ring's pairs.
        self.soft, self.mpi = thresholds.get("soft_fabric"), thresholds.get("mpi_allreduce")
        self.baseline = thresholds.get("baseline")
        self.fraction = thresholds.get("baseline_percent", 70) / 100
        self.soft_pairs: list = []


def _gpu_job(run: _Run, job: dict, check: str, failed: bool) -> None:
    vm = job["vm"]
    expected = next(m["gpus"] for m in run.members if m["id"] == vm)
    run.reasons[vm] += (
        [_failed(job, check)] if failed else gpu_reasons(job["figures"], expected, run.level)
    )


def _nccl_local_job(run: _Run, job: dict, check: str, failed: bool) -> None:
    threshold = run.thresholds["intra_busbw_gbs"]
    run.reasons[job["vm"]] += (
        [_failed(job, check)]
        if failed
        else nccl_reason("nccl_local_low", job["figures"], threshold, run.margin)
    )


def _ib_client_job(run: _Run, job: dict, check: str, failed: bool) -> None:
    vm, figures, expected = job["vm"], job["figures"], run.thresholds["ports"]
    run.reasons[vm] += port_reasons(figures)
    found = len(figures.get("devices", []))
    if found < expected:
        run.reasons[vm].append(reason("ports_missing", Verdict.BAD, found=found, expected=expected))
    if run.soft:
        _soft_pair(run, job)
        return
    _ib(job, run.names, run.ports, run.thresholds["ib_write_bw_gbps"], run.margin, run.owned)


def below_baseline(code, value, baseline, fraction, **params) -> dict | None:
    """불량 when ``value`` is below ``fraction`` of ``baseline`` (no baseline: nothing)."""
    if not baseline or value >= baseline * fraction:
        return None
    percent = 100.0 * value / baseline
    return reason(
        code,
        Verdict.BAD,
        value=value,
        baseline=baseline,
        percent=percent,
        fraction=fraction * 100,
        **params,
    )


def _soft_pair(run: _Run, job: dict) -> None:
    """The ring pair's one soft device, client → server, against the pair's baseline."""
    client, server = job["vm"], job["peers"][0]
    figures = job["figures"]
    devices = figures.get("devices") or [""]
    bw = (figures.get("bw") or {}).get(devices[0]) or {}
    names = {"client": run.names.get(client, "?"), "server": run.names.get(server, "?")}
    low: dict | None
    if "average_gbps" in bw and bw["average_gbps"] <= 0:
        # Nothing crossed the link: 불량 with or without a baseline (and never one of 0).
        low = reason("ib_pair_idle", Verdict.BAD, **names)
    elif "average_gbps" in bw:
        base = pair_figure(run.baseline, client, server)
        low = below_baseline("ib_below_baseline", bw["average_gbps"], base, run.fraction, **names)
    else:
        detail = str(bw.get("error") or figures.get("error") or "")[:300]
        low = reason("ib_pair_failed", Verdict.BAD, detail=detail, **names)
    run.soft_pairs.append((client, server, low))


def _nccl_pair_job(run: _Run, job: dict, check: str, failed: bool) -> None:
    vm, peer = job["vm"], job["peers"][0]
    for member, other in ((vm, peer), (peer, vm)):
        lows = (
            [_failed(job, check)]
            if failed
            else nccl_reason(
                "nccl_pair_low",
                job["figures"],
                run.thresholds["multi_busbw_gbs"],
                run.margin,
                peer=run.names.get(other, "?"),
            )
        )
        run.pairs.measured(member, lows[0] if lows else None)


def _nccl_all_job(run: _Run, job: dict, check: str, failed: bool) -> None:
    nccl = job["figures"].get("nccl") or {}
    if run.mpi and not failed:
        run.everyone = (
            [reason("nccl_wrong", Verdict.BAD, wrong=nccl["wrong"])] if nccl.get("wrong") else []
        )
        if "busbw_gbs" in nccl:
            low = below_baseline(
                "allreduce_below_baseline",
                nccl["busbw_gbs"],
                (run.baseline or {}).get("allreduce_busbw_gbs"),
                run.fraction,
                nodes=len(run.members),
            )
            run.everyone += [low] if low else []
        return
    run.everyone = (
        [_failed(job, check)]
        if failed
        else nccl_reason(
            "nccl_all_low",
            job["figures"],
            run.thresholds["multi_busbw_gbs"],
            run.margin,
            nodes=len(run.members),
        )
    )


# What each kind of job's figures say, about its member or (measured between members) about
# the members it involved; a kind not listed here says nothing.
_BY_KIND = {
    Kind.GPU: _gpu_job,
    Kind.NCCL_LOCAL: _nccl_local_job,
    Kind.IB_CLIENT: _ib_client_job,
    Kind.NCCL_PAIR: _nccl_pair_job,
    Kind.NCCL_ALL: _nccl_all_job,
}


def _read_job(run: _Run, job: dict, labels: dict) -> None:
    vm, kind, figures = job["vm"], job["kind"], job["figures"]
    check = str(labels.get(kind, kind))
    if vm not in run.reasons:
        return
    if job["status"] == JobStatus.SKIPPED:  # it measured nothing: the member lacks GPUs,
        if (figures or {}).get("skipped"):  # or a member it needed was silent
            run.reasons[vm].append(reason("skipped_no_gpus", Verdict.OK, check=check))
        return
    if job["status"] == JobStatus.NO_ANSWER:
        run.reasons[vm].append(
            reason("no_answer", Verdict.NO_ANSWER, check=check, seconds=job["timeout"])
        )
        return
    if figures.get("missing"):  # nothing measured: the member lacks the software
        run.missing.setdefault(vm, set()).update(figures["missing"])
        return
    by_kind = _BY_KIND.get(kind)
    if by_kind is not None:
        by_kind(run, job, check, job["status"] == JobStatus.FAILED)


def _blame(run: _Run) -> None:
    """The missing tools, the shared measurements and the whole cluster's figure, each added
    to the reasons of the members they are held against."""
    reasons = run.reasons
    for vm, tools in run.missing.items():
        named = "/".join(TOOL_NAMES.get(t, t) for t in TOOLS if t in tools)
        reasons[vm].append(reason("tools_missing", Verdict.WARN, tools=named))
    blamed = set()
    for shared in (run.ports, run.pairs):
        for key, low in shared.blamed():
            member = key[0] if isinstance(key, tuple) else key
            if member in reasons:
                reasons[member].append(low)
                blamed.add(member)
    blamed |= _blame_soft_pairs(run)
    for low in run.everyone:
        # The slowest member sets a ring's pace: the whole cluster's figure is held against
        # the members already found slow, or (none being) against all as 점검 필요.
        for member in blamed or reasons:
            reasons[member].append(low if blamed else {**low, "level": Verdict.WARN})


def _blame_soft_pairs(run: _Run) -> set:
    """Each low ring pair against the members of it whose every pair is low, or (neither
    being) against both: which end of a soft pair is slow, one figure cannot tell."""
    counts: dict = {}
    lows: dict = {}
    for client, server, low in run.soft_pairs:
        for member in (client, server):
            counts[member] = counts.get(member, 0) + 1
            lows[member] = lows.get(member, 0) + (low is not None)
    every_low = {member for member, n in counts.items() if lows[member] == n}
    blamed = set()
    for client, server, low in run.soft_pairs:
        if low is None:
            continue
        for member in [m for m in (client, server) if m in every_low] or [client, server]:
            if member in run.reasons:
                run.reasons[member].append(low)
                blamed.add(member)
    return blamed


def judge(members: list[dict], jobs: list[dict], thresholds: dict, level: int) -> dict:
    """``{vm id: (verdict, reasons)}`` for ``members`` (``{"id", "name", "gpus"}``) from
    ``jobs`` (``{"kind", "vm", "peers", "status", "figures", "timeout"}``)."""
    run = _Run(members, jobs, thresholds, level)
    labels = dict(Kind.choices)
    for job in jobs:
        _read_job(run, job, labels)
    _blame(run)
    return {
        vm: (
            max((r["level"] for r in found), key=SEVERITY.__getitem__, default=Verdict.OK),
            sorted(found, key=lambda r: -SEVERITY[r["level"]]),  # the worst reasons first
        )
        for vm, found in run.reasons.items()
    }
