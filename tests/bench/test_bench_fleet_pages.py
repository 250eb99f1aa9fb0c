"""bench_fleet_pages runs end to end on a small fleet (in a process of its own, as a developer
runs it): every request answers 200 with the rows it should, and each target is reported."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command


@pytest.mark.postgres_only("bench_fleet_pages measures PostgreSQL, in a scratch database")
@pytest.mark.slow
def test_bench_fleet_pages_runs_and_reports_its_targets():
    result = subprocess.run(
        [sys.executable, "manage.py", "bench_fleet_pages", "--total-clusters", "300",
         "--project-clusters", "120", "--wide", "4,16", "--api-vms", "300", "--rounds", "3",
         "--warmup", "1", "--no-browser"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DEBUG": "0", "DJANGO_SETTINGS_MODULE": "tests.bench.settings"},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    for key in ("floor", "list", "list last", "members 16", "devices 4", "api vms last"):
        assert f"\n{key} " in result.stdout
    assert result.stdout.count("x\n") >= 7  # the seven targets, each with its ratio
    assert "data: 300 clusters" in result.stdout


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--wide", "1024,256"], "smaller first"),
        (["--wide", "a,b"], "separated by commas"),
        (["--project-clusters", "10"], "between 100"),
    ],
)
def test_bench_fleet_pages_refuses_sizes_that_give_no_figure(args, refusal):
    with pytest.raises(CommandError, match=refusal):
        call_command("bench_fleet_pages", *args, "--no-browser")
