"""The agent is a distribution of its own (metrics/vm_agent): a wheel pip builds from the
repository and installs on any VM, depending on psutil only, with a console script — not
files copied beside each other (which failed with ``No module named 'toolparse'``)."""

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import psutil
import pytest

from metrics.vm_agent import VERSION

pytestmark = pytest.mark.slow


@pytest.fixture
def wheel(agent_wheel):
    return agent_wheel


def test_the_wheel_holds_the_agent_its_parsers_and_a_console_script(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(meta_name).decode())
        entry_points = archive.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    for module in ("main", "collect", "devices", "exporters", "jobs", "transport", "toolparse"):
        assert f"vc_metrics_agent/{module}.py" in names
    assert not any(name.endswith("pyproject.toml") for name in names)
    # The release's version (the portal's: one ``VERSION``), and the floor it is tested on.
    assert metadata["Version"] == VERSION and metadata["Requires-Python"] == ">=3.9"
    requires = metadata.get_all("Requires-Dist")
    assert [r for r in requires if "extra ==" not in r] == ["psutil>=5.6"]
    assert any(r.startswith("prometheus-client") and "exporters" in r for r in requires)
    assert any(r.startswith("nvidia-ml-py") and "nvml" in r for r in requires)
    assert "vc-metrics-agent = vc_metrics_agent.main:main" in entry_points


def test_installed_alone_it_imports_and_runs_without_the_portal(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    # Only the installed package and psutil: not the repository, not prometheus-client.
    code = (
        "import sys, vc_metrics_agent.main as a, vc_metrics_agent.toolparse as t;"
        "assert 'metrics' not in sys.modules and 'prometheus_client' not in sys.modules;"
        "c = a.make_collector('auto', infiniband_root='/nonexistent');"
        "s = c.collect(); print(sorted(t.PARSERS), s['cpu_util'] is not None, s['gpu_util'])"
    )
    path = {"PYTHONPATH": f"{target}:{Path(psutil.__file__).parents[1]}"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=path, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "True None" in done.stdout and "dcgmi" in done.stdout
    usage = subprocess.run(
        [sys.executable, "-S", "-m", "vc_metrics_agent.main"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=path,
    )
    assert "METRICS_AGENT_URL" in usage.stderr and usage.returncode == 2
