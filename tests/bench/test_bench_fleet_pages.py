"""bench_fleet_pages runs end to end on a small fleet (in a process of its own, as a developer
runs it): every request answers 200 with the rows it should, and each target is reported."""

import pytest
from django.core.management import CommandError, call_command

from tests.bench.processes import run_bench


@pytest.mark.postgres_only("bench_fleet_pages measures PostgreSQL, in a scratch database")
@pytest.mark.slow
def test_bench_fleet_pages_runs_and_reports_its_targets():
    out = run_bench(
        "bench_fleet_pages", "--total-clusters", "300",
         "--project-clusters", "120", "--wide", "4,16", "--api-vms", "300", "--rounds", "3",
         "--warmup", "1", "--no-browser"
    )  # fmt: skip
    for key in ("floor", "list", "list last", "members 16", "devices 4", "api vms last"):
        assert f"\n{key} " in out
    assert out.count("x\n") >= 7  # the seven targets, each with its ratio
    assert "data: 300 clusters" in out


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
