"""bench_api runs end to end on a small world (in a process of its own, as a developer runs
it): every request answers 200 with the rows it should, and the query counts are equal."""

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from tests.bench.processes import run_bench


@pytest.mark.postgres_only("bench_api measures PostgreSQL, in a scratch database")
@pytest.mark.slow
def test_bench_api_runs_and_reports_its_targets():
    out = run_bench(
        "bench_api", "--clusters", "120", "--rounds", "3",
         "--warmup", "1"
    )  # fmt: skip
    assert "met    queries equal at 10 and 10,000" in out
    for key in ("floor", "list10", "list10k", "last10k", "detail", "vms256", "members256"):
        assert f"\n{key} " in out


def test_bench_api_takes_no_database_name():
    with pytest.raises(CommandError, match="unrecognized arguments"):
        call_command("bench_api", "--database", settings.DATABASES["default"]["NAME"])
