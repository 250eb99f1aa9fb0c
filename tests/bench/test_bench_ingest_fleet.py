"""bench_ingest_fleet runs end to end at a tiny size (in a process of its own, as a developer
runs it): every step's POSTs answer 200, the raw COPY, the rollup run and the simulated days
print their figures, and the partitions stay as many from one day to the next."""

import re

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from tests.bench.management.commands import bench_ingest_fleet
from tests.bench.processes import run_bench


@pytest.mark.postgres_only("bench_ingest_fleet measures PostgreSQL, in a scratch database")
@pytest.mark.slow
def test_bench_ingest_fleet_runs_and_reports_its_targets():
    out = run_bench(
        "bench_ingest_fleet", "--vms", "24", "--rates", "10,20",
         "--seconds", "1", "--workers", "1", "--connections", "4", "--copy-seconds", "0.5",
         "--rollup-runs", "1", "--week-vms", "1", "--week-days", "2", timeout=600
    )  # fmt: skip
    out = out
    assert "failed" not in out
    assert re.search(r"^1 worker\(s\): holds [\d,]+ POSTs/s", out, re.MULTILINE), out[-2000:]
    assert "rows/s at the best knee / raw COPY" in out
    assert "rollup task run at 24 members" in out
    days = re.findall(
        r"^\s+([12])\s+[\d,]+\s+[\d,]+ \([\d,]+ / [\d,]+\)\s+(\d+)", out, re.MULTILINE
    )
    assert [day for day, _partitions in days] == ["1", "2"]
    assert days[0][1] == days[1][1]  # as many partitions after day 2 as after day 1


def test_bench_ingest_fleet_takes_no_database_name():
    with pytest.raises(CommandError, match="unrecognized arguments"):
        call_command("bench_ingest_fleet", "--database", settings.DATABASES["default"]["NAME"])


@pytest.mark.parametrize(
    "options",
    [["--rates", "0,10"], ["--workers", "two"], ["--week-vms", "10", "--vms", "5"]],
)
def test_bench_ingest_fleet_refuses_options_that_give_no_figure(options):
    command = bench_ingest_fleet.Command()
    opts = vars(command.create_parser("manage.py", "bench_ingest_fleet").parse_args(options))
    assert command.refusal(opts)
    assert not command.refusal(vars(command.create_parser("m", "b").parse_args([])))
