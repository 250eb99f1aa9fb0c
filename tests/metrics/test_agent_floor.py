"""The agent runs on the Python it declares (``requires-python`` in metrics/vm_agent: 3.9),
not only on the portal's 3.11.

Everywhere: each distribution is linted at its own floor, and vermin finds nothing in the
agent that 3.9 lacks, by syntax or by the standard library it calls (``zip(strict=)``, an
``X | None`` annotation evaluated when its def runs). Where a 3.9 interpreter is present
(``VC_AGENT_FLOOR_PYTHON``, ``python3.9`` on PATH, or pyenv's; CI's machines have pyenv's,
and there a missing one fails): the agent's own wheel, installed by 3.9's pip (which checks
``Requires-Python``), imports every module, parses the tools' real output and the exporters'
as 3.11 does, runs a job's tools, and posts a sample, checks its token and polls for jobs
against the live portal, which records its version."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import prometheus_client
import psutil
import pytest

from metrics import services
from metrics.models import MetricsToken, Sample
from metrics.vm_agent import VERSION, allreduce, toolparse
from metrics.vm_agent import exporters as agent_exporters
from metrics.vm_agent import jobs as agent_jobs
from vms.models import VmStatus

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "metrics" / "vm_agent"
FLOOR = (3, 9)
TOOL_FIXTURES = [
    *sorted((ROOT / "tests" / "validation" / "fixtures" / "real").glob("*-*.*")),
    *sorted((ROOT / "tests" / "validation" / "fixtures").glob("*_*.*")),
]
EXPORTER_FIXTURES = sorted((ROOT / "tests" / "metrics" / "fixtures" / "real").glob("*.txt"))
GPUS = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-aaaa)\n"
# What GET /api/metrics/cluster answers a member (clusters.peers), for the files' writer.
CLUSTER_VIEW = {
    "cluster": {"id": 1, "name": "ring", "status": "RUNNING"},
    "rank": 0,
    "nnodes": 2,
    "master_addr": "10.200.0.2",
    "master_port": 29500,
    "nproc_per_node": 8,
    "members": [
        {
            "rank": rank,
            "name": f"n{rank}",
            "hostname": f"n{rank}",
            "address": address,
            "private_ip": None,
            "slots": 8,
            "host_keys": [],
        }
        for rank, address in enumerate(("10.200.0.2", "10.200.0.3"))
    ],
    "ssh": {"user": "vc", "public_key": "ssh-ed25519 AAAA k", "private_key": "PRIVATE\n"},
}


def floor_of(pyproject: Path) -> tuple[int, int]:
    spec = tomllib.loads(pyproject.read_text())["project"]["requires-python"]
    major, minor = re.match(r">=(\d+)\.(\d+)", spec).groups()
    return int(major), int(minor)


@pytest.mark.parametrize(
    ("pyproject", "module"),
    [
        (ROOT / "pyproject.toml", ROOT / "portal" / "foundation" / "kernel.py"),
        (AGENT / "pyproject.toml", AGENT / "main.py"),
        (ROOT / "portal" / "vc" / "pyproject.toml", ROOT / "portal" / "vc" / "vc_cli" / "main.py"),
    ],
)
def test_each_distribution_is_linted_at_its_own_floor(pyproject, module):
    major, minor = floor_of(pyproject)
    ruff = tomllib.loads(pyproject.read_text())["tool"]["ruff"]
    assert ruff["target-version"] == f"py{major}{minor}"
    # What ruff resolves for a module of that distribution (its nearest pyproject).
    settings = subprocess.run(
        [Path(sys.executable).with_name("ruff"), "check", "--show-settings", module],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert f'Settings path: "{pyproject}"' in settings
    assert f"linter.unresolved_target_version = {major}.{minor}\n" in settings


def test_the_agent_declares_the_floor_tested_here():
    assert floor_of(AGENT / "pyproject.toml") == FLOOR


def test_nothing_in_the_agent_needs_more_than_its_floor():
    done = subprocess.run(
        [
            Path(sys.executable).with_name("vermin"),
            *("--no-tips", "--violations", "--processes", "1"),
            f"--target={FLOOR[0]}.{FLOOR[1]}-",
            # Annotations as 3.9 runs them: evaluated when the def runs (no module of the
            # agent defers them), where ``X | None`` is a TypeError.
            *("--eval-annotations", "--feature", "union-types"),
            str(AGENT),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for path in AGENT.glob("*.py"):
        assert "from __future__ import annotations" not in path.read_text(), path


# ---------------------------------------------------------------------------------------------
# On the floor itself


def floor_python() -> str | None:
    """A Python 3.9 interpreter on this machine, if there is one."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [
        os.environ.get("VC_AGENT_FLOOR_PYTHON"),
        shutil.which("python3.9"),
        *map(str, sorted(pyenv.glob("versions/3.9*/bin/python3.9"))),
    ]
    for candidate in filter(None, candidates):
        done = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0 and done.stdout.strip() == str(FLOOR):
            return candidate
    return None


@pytest.fixture(scope="module")
def python39():
    found = floor_python()
    if found is None:
        message = "no Python 3.9 here (set VC_AGENT_FLOOR_PYTHON): the agent is not run on it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def installed(python39, agent_wheel, tmp_path_factory):
    """The agent's wheel installed by 3.9's own pip, beside psutil (an abi3 build) and
    prometheus-client (pure Python) — the only packages it may use."""
    site = tmp_path_factory.mktemp("site39")
    subprocess.run(
        [
            python39,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            site,
            agent_wheel,
        ],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    for package in (psutil, prometheus_client):
        (site / package.__name__).symlink_to(Path(package.__file__).parent)
    return site


SCRIPT = """
import json, sys
given = json.load(sys.stdin)
sys.path.insert(0, given["site"])
import vc_metrics_agent
from vc_metrics_agent import (
    allreduce, cluster, collect, devices, exporters, hostkeys, jobs, main, toolparse, transport)

out = {"python": list(sys.version_info[:2]), "version": vc_metrics_agent.__version__,
       "agent_file": vc_metrics_agent.__file__}
def figures(tool, text):
    try:
        return toolparse.parse(tool, text)
    except toolparse.ParseError as exc:
        return {"ParseError": str(exc)}
out["tools"] = {name: figures(tool, text) for name, (tool, text) in given["tools"].items()}
out["exporters"] = {
    name: (exporters.parse_dcgm if "dcgm" in name else exporters.parse_node)(text)
    for name, text in given["exporters"].items()
}
runner = jobs.JobRunner(given["url"], given["token"], infiniband_root=given["ib"])
out["gpu_job"] = runner.execute({"id": 1, "kind": "gpu", "params": {"level": 1}, "timeout": 30})
out["polled"] = len(runner.poll_once())
out["check"] = main.check(given["url"], given["token"])
collector = main.make_collector("auto", given["ib"], given["closed"], given["closed"])
running = main.Agent(given["url"], given["token"], collector=collector)
running.tick()
out["stored"] = running.stored
files = cluster.ClusterFiles(given["root"], home=given["root"] + "/home/vc")
out["cluster_files"] = sorted(
    str(path)[len(given["root"]):] for path in files.apply(given["view"]))
out["host_keys"] = hostkeys.read(given["ib"])
out["allreduce_without_mpi4py"] = allreduce.main(["-b", "4K", "-e", "4K"])
out["allreduce_row"] = allreduce.row(1 << 20, 2, (0.002, 0), (0.002, 0))
print(json.dumps(out))
"""


def figures(tool, text):
    """What the parser makes of ``text`` (or why not), as JSON carries it."""
    try:
        return json.loads(json.dumps(toolparse.parse(tool, text)))
    except toolparse.ParseError as exc:
        return {"ParseError": str(exc)}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_on_python_3_9_the_agent_parses_runs_and_reports(
    installed, python39, world, live_server, tmp_path
):
    vm = world.vm("floor", status=VmStatus.RUNNING)
    _vm, token = services.rotate_token(vm.pk, actor=None)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\nprintf '{GPUS}'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    tools = {}
    for path in TOOL_FIXTURES:
        tool = next((t for t in toolparse.PARSERS if path.name.startswith(t)), None)
        if tool:
            tools[path.name] = (tool, path.read_text())
    assert {tool for tool, _text in tools.values()} >= {"all_reduce_perf", "dcgmi", "ib_write_bw"}
    given = {
        "tools": tools,
        "exporters": {path.name: path.read_text() for path in EXPORTER_FIXTURES},
        "url": f"{live_server.url}/api/metrics/ingest",
        "token": token,
        "ib": str(tmp_path / "no-infiniband"),
        "closed": "http://127.0.0.1:9/metrics",
        "site": str(installed),
        "root": str(tmp_path / "root"),
        "view": CLUSTER_VIEW,
    }
    done = subprocess.run(
        [python39, "-I", "-c", SCRIPT],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["python"] == list(FLOOR) and out["version"] == VERSION
    assert out["agent_file"].startswith(str(installed))  # the wheel's, not the checkout's
    # The same figures as 3.11 reads from the same text.
    assert out["tools"] == {name: figures(tool, text) for name, (tool, text) in tools.items()}
    assert sum("ParseError" not in parsed for parsed in out["tools"].values()) >= 6
    assert out["exporters"] == {
        name: json.loads(json.dumps(parse(text)))
        for name, text in given["exporters"].items()
        for parse in [agent_exporters.parse_dcgm if "dcgm" in name else agent_exporters.parse_node]
    }
    smi, dcgmi = out["gpu_job"]
    assert smi["exit_code"] == 0 and smi["stdout"] == GPUS
    assert dcgmi["exit_code"] == agent_jobs.NOT_FOUND  # not installed here: reported as such
    assert out["polled"] == 0 and out["check"] == vm.pk and out["stored"] == 1
    assert Sample.objects.filter(vm=vm).count() == 1
    assert out["cluster_files"] == [
        "/etc/hosts",
        "/etc/vc/cluster.env",
        "/etc/vc/hostfile",
        "/home/vc/.ssh/authorized_keys",
        "/home/vc/.ssh/config",
        "/home/vc/.ssh/id_vc_cluster",
        "/home/vc/.ssh/id_vc_cluster.pub",
    ]
    assert out["host_keys"] == []
    # The all-reduce benchmark imports without mpi4py and says so when run (exit 127).
    assert out["allreduce_without_mpi4py"] == agent_jobs.NOT_FOUND
    assert out["allreduce_row"] == allreduce.row(1 << 20, 2, (0.002, 0), (0.002, 0))
    assert MetricsToken.objects.get(vm=vm).agent_version == VERSION
