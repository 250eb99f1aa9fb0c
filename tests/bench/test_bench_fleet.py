"""bench_fleet runs end to end at tiny sizes (in a process of its own, as a developer runs
it, with real Celery workers on the Redis of ``CELERY_BROKER_URL``): every round starts every
cluster's members and each figure is printed with its goal."""

import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.bench.processes import run_bench


@pytest.mark.postgres_only("bench_fleet measures PostgreSQL, in a scratch database")
@pytest.mark.slow
def test_bench_fleet_runs_and_reports_its_goals():
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        pytest.skip("bench_fleet starts real Celery workers: CELERY_BROKER_URL=redis://…")
    out = run_bench(
        "bench_fleet", "--hosts", "6", "--clusters", "3",
         "--members", "2", "--workers", "1,2"
    )  # fmt: skip
    out = out
    for workers in (1, 2):
        assert f"{workers} worker(s): 클러스터 시작 → every member 실행중 p50 " in out
    assert "starts/s over 1 worker's:" in out and "(goal >= 1.7: " in out
    assert "placement of one 2-member cluster at 6 hosts:" in out
    assert "one reconciler pass over 6 hosts:" in out and "6 VMs running, 0 repaired" in out
    assert "database round trips per member start:" in out


def test_bench_fleet_refuses_sizes_the_fleet_cannot_hold():
    result = subprocess.run(
        [sys.executable, "manage.py", "bench_fleet", "--hosts", "1", "--clusters", "4",
         "--members", "4", "--gpus", "8"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DEBUG": "0", "DJANGO_SETTINGS_MODULE": "tests.bench.settings",
             "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
             "CELERY_BROKER_URL": "redis://127.0.0.1:1/0"},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "need more than the 1 slots of 1 hosts" in result.stderr
