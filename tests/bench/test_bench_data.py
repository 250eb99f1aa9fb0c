"""The benchmarks' samples are laid out as a live system's are: in the order agents send
them, instant by instant, so what an index on time finds there it finds in production."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tests.bench.devices import time_major


class Vm:
    def __init__(self, pk):
        self.pk = pk


@pytest.mark.postgres_only("the benchmark's rows are made by PostgreSQL's SQL (arrays, casts)")
@pytest.mark.django_db
@pytest.mark.parametrize("devices", [1, 4])
def test_the_grid_is_every_member_instant_and_device_once_in_time_order(devices):
    vms = [Vm(pk) for pk in (11, 7, 30)]
    start = datetime(2026, 12, 5, 18, 0, tzinfo=UTC)
    grid, params = time_major(vms, start, start + timedelta(seconds=50), 10, devices)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT v, t, d FROM {grid}", params)
        rows = cursor.fetchall()
    instants = [start + timedelta(seconds=10 * i) for i in range(5)]
    # Instant by instant; within one, the members in their order, each with its devices.
    assert rows == [(v.pk, t, d) for t in instants for v in vms for d in range(devices)]
