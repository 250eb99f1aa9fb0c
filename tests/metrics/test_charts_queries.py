"""The 메트릭 tab's queries: pinned over the request floor (a ``login_required`` view that
answers "ok", tests.bench.urls), and the same for 3 members as for 40 — the cluster lines read
the cluster rollups, not a row per member; the per-device panel is its own request."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import storage
from tests.metrics.test_straggler import write
from vms.models import VmStatus

# Queries beyond the floor's (whose role map also answers VM READ). The tab: the cluster, the
# members a 교체 took out, the members, the rollups' cursor, the cluster lines (savepoint, jit
# off, the query, release: the test's transaction makes the atomic block a savepoint), when a
# member last reported, the error markers. The device panel: the cluster, the replaced, the
# members, the cursor, how long each member has reported, then GPUs and ports (4 each); the
# straggler: the cluster's criteria, when a member last reported, and the GPUs' and ports'
# per-minute means (savepoint, jit off, two queries, release).
TAB_OVER_FLOOR = 10
DEVICES_OVER_FLOOR = 20


@pytest.fixture
def clusters(world):
    now = timezone.now()
    made = {}
    for count in (3, 40):
        cluster = world.cluster(f"q{count}", status=ClusterStatus.RUNNING)
        members = world.members(cluster, count, status=VmStatus.RUNNING)
        write(members, now - timedelta(minutes=20), now - timedelta(seconds=5), lambda *a: 90.0)
        made[count] = cluster
    storage.rollup()
    return made


def count(client, path, **params):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path, params)
    assert response.status_code == 200
    return len(queries), response.content.decode()


@pytest.mark.urls("tests.bench.urls")
@pytest.mark.parametrize("range_key", ["1h", "6h", "24h", "7d"])
def test_the_tab_costs_the_same_queries_at_3_and_40_members(login, clusters, range_key):
    client = login("viewer")
    floor, _ok = count(client, "/__bench__/floor/")
    seen = {}
    for members, cluster in clusters.items():
        tab, html = count(
            client, reverse("metrics:cluster_charts", args=[cluster.pk]), range=range_key
        )
        assert 'id="metrics-fig-gpu"' in html and 'id="metrics-devices"' in html
        devices, panel = count(
            client, reverse("metrics:cluster_devices", args=[cluster.pk]), range=range_key
        )
        assert 'id="metrics-fig-heatmap"' in panel
        seen[members] = (tab - floor, devices - floor)
    assert seen[3] == seen[40]
    if connection.vendor == "postgresql":  # the figures count PostgreSQL's own (jit off)
        assert seen[40] == (TAB_OVER_FLOOR, DEVICES_OVER_FLOOR)
