"""The live clusters' tally: whatever writes the clusters table (the ORM one row at a time, in
bulk, by queryset, SQL by hand), each project's deltas sum to its count of live clusters;
merging keeps that; the triggers are the migration's (migrated back they are gone, forward
again they are back and the tally recounted, on PostgreSQL and on SQLite); and the cluster
list's total is read from the tally exactly when it is not filtered."""

import os

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum

from clusters import tally
from clusters.models import ClusterStatus, LiveClusterTally, VirtualCluster
from portal.models import Project
from tests.child import run_python

# A cluster row's 멤버 cell (one a row).
MEMBERS_CELL = '<td class="num" data-label="멤버">'


def tallied() -> dict[int, int]:
    sums = LiveClusterTally.objects.values("project_id").annotate(n=Sum("delta"))
    return {row["project_id"]: row["n"] for row in sums if row["n"]}


def counted() -> dict[int, int]:
    live = VirtualCluster.objects.alive().values("project_id").annotate(n=Sum(1))
    return {row["project_id"]: row["n"] for row in live}


@pytest.fixture
def fleet(world):
    """Five clusters of demo (one 삭제됨), two of other."""
    for i, status in enumerate(
        [
            ClusterStatus.RUNNING,
            ClusterStatus.UNALLOCATED,
            ClusterStatus.TERMINATED,
            ClusterStatus.DELETED,
            ClusterStatus.WAITING,
        ]
    ):
        world.cluster(f"d{i}", status=status)
    for i in range(2):
        world.cluster(f"o{i}", project=world.other)
    assert tallied() == counted() == {world.demo.pk: 4, world.other.pk: 2}
    return world


def test_a_status_change_between_live_statuses_writes_no_delta(fleet):
    before = LiveClusterTally.objects.count()
    cluster = VirtualCluster.objects.get(name="d1")
    for status in (ClusterStatus.PROVISIONING, ClusterStatus.ALLOCATED, ClusterStatus.RUNNING):
        cluster.status = status
        cluster.save()
    cluster.name = "renamed"
    cluster.save()
    assert LiveClusterTally.objects.count() == before
    assert tallied() == counted()


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda w: VirtualCluster.objects.filter(name="d0").update(
            status=ClusterStatus.DELETED), id="deleted-by-queryset"),
        pytest.param(lambda w: VirtualCluster.objects.filter(name="d3").update(
            status=ClusterStatus.RUNNING), id="deleted-comes-back"),
        pytest.param(lambda w: VirtualCluster.objects.filter(name="d1").delete(), id="row-deleted"),
        pytest.param(lambda w: VirtualCluster.objects.filter(name="d3").delete(),
                     id="deleted-row-deleted"),
        pytest.param(lambda w: VirtualCluster.objects.filter(name="o0").update(project=w.demo),
                     id="moved-to-another-project"),
        pytest.param(lambda w: VirtualCluster.objects.bulk_create([
            VirtualCluster(project=w.other, name=f"b{i}", zone=w.zone_a, instance_type=w.h100,
                           fabric_type="INFINIBAND",
                           status=ClusterStatus.DELETED if i == 2 else ClusterStatus.RUNNING)
            for i in range(3)
        ]), id="bulk-created"),
        pytest.param(lambda w: connection.cursor().execute(
            "UPDATE clusters_virtualcluster SET status = 'DELETED' WHERE project_id = %s",
            [w.demo.pk]), id="sql-by-hand"),
    ],
)  # fmt: skip
def test_every_write_keeps_the_sums_equal_to_the_counts(fleet, write):
    write(fleet)
    assert tallied() == counted()


def test_merging_leaves_a_row_per_project_and_the_same_sums(fleet):
    VirtualCluster.objects.filter(project=fleet.other).update(status=ClusterStatus.DELETED)
    sums = tallied()
    tally.merge()
    assert tallied() == sums == counted() == {fleet.demo.pk: 4}
    assert list(LiveClusterTally.objects.values_list("project_id", "delta")) == [(fleet.demo.pk, 4)]


def migrate(target: str) -> None:
    """Migrate the clusters app to ``target``, back or forward, inside the test's transaction:
    PostgreSQL's DDL rolls back with it, so the test database is left as it was."""
    MigrationExecutor(connection).migrate([("clusters", target)])


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite cannot migrate inside a transaction: the SQLite child below does this",
)
def test_migrated_back_the_triggers_are_gone_and_forward_again_the_tally_is_true(fleet):
    migrate("0013_live_cluster_tally")
    fleet.cluster("unseen")
    VirtualCluster.objects.filter(name="o0").update(status=ClusterStatus.DELETED)
    LiveClusterTally.objects.create(project=fleet.other, delta=40)  # a tally gone wrong
    assert tallied() == {fleet.demo.pk: 4, fleet.other.pk: 42}
    migrate("0014_live_cluster_tally_triggers")
    assert tallied() == counted() == {fleet.demo.pk: 5, fleet.other.pk: 1}
    fleet.cluster("seen")
    VirtualCluster.objects.filter(name="o1").update(project=fleet.demo)
    assert tallied() == counted() == {fleet.demo.pk: 7}


@pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="SQLite's flush deletes row by row; PostgreSQL's truncates, firing no row trigger",
)
@pytest.mark.parametrize("clusters_first", [True, False], ids=["clusters-first", "project-first"])
def test_a_project_deleted_with_its_clusters_leaves_no_delta_behind(fleet, clusters_first):
    """As a flush deletes them, in either order (it varies with the hash seed): no delta
    of the deleted project stays (the commit would fail on its foreign key), and the other
    project's tally is untouched."""
    gone = Project.objects.create(slug="gone", name="gone")
    fleet.cluster("g0", project=gone)
    fleet.cluster("g1", project=gone, status=ClusterStatus.DELETED)
    assert tallied() == {fleet.demo.pk: 4, fleet.other.pk: 2, gone.pk: 1}
    statements = [
        ("DELETE FROM clusters_virtualcluster WHERE project_id = %s", [gone.pk]),
        ("DELETE FROM portal_project WHERE id = %s", [gone.pk]),
    ]
    with connection.cursor() as cursor:
        for sql, params in statements if clusters_first else statements[::-1]:
            cursor.execute(sql, params)
        cursor.execute("PRAGMA foreign_key_check(clusters_liveclustertally)")
        assert cursor.fetchall() == []
    assert not LiveClusterTally.objects.filter(project_id=gone.pk).exists()
    assert tallied() == counted() == {fleet.demo.pk: 4, fleet.other.pk: 2}


def test_live_total_is_the_count_within_the_readers_projects(fleet):
    def total(projects):
        row = VirtualCluster.objects.annotate(t=tally.live_total(fleet.demo.pk, projects))
        return row.values_list("t", flat=True).first()

    assert total(None) == total((fleet.demo.pk, fleet.other.pk)) == 4
    assert total((fleet.other.pk,)) == 0


def test_the_list_reads_its_total_from_the_tally_unless_filtered(fleet, login):
    client = login("admin")
    LiveClusterTally.objects.create(project=fleet.demo, delta=100)  # a tally gone wrong: 104
    page = client.get("/clusters/").content.decode()
    running = client.get("/clusters/", {"status": ClusterStatus.RUNNING}).content.decode()
    assert page.count(MEMBERS_CELL) == 4 and running.count(MEMBERS_CELL) == 1
    assert "1 / 3 페이지" in page  # 104 clusters, 50 a page: the total is the tally's
    assert "페이지</span>" not in running  # counted: one cluster, one page


SQLITE = """
import django
django.setup()
from django.core.management import call_command
from django.db.models import Sum
call_command("migrate", verbosity=0)
from clusters import tally
from clusters.models import LiveClusterTally, VirtualCluster
from portal.models import Project
from portal.catalog.models import InstanceType, Zone

zone = Zone.objects.create(code="z", name="z")
itype = InstanceType.objects.create(code="t", gpu_model="H100", gpu_count=8, vcpu=1, memory_gib=1)
a, b = (Project.objects.create(slug=s, name=s) for s in "ab")
made = [VirtualCluster.objects.create(project=a, name=f"c{i}", zone=zone, instance_type=itype,
                                      fabric_type="INFINIBAND", status="RUNNING") for i in range(4)]
made[0].status = "DELETED"; made[0].save()
made[1].status = "WAITING"; made[1].save()
VirtualCluster.objects.filter(pk=made[2].pk).update(project=b)
made[3].delete()
def sums():
    rows = LiveClusterTally.objects.values("project__slug").annotate(n=Sum("delta"))
    return sorted((r["project__slug"], r["n"]) for r in rows if r["n"])
before = sums()
tally.merge()
print(before, sums(), LiveClusterTally.objects.count())

# Migrated back, no trigger counts; forward again, the tally is recounted and kept.
call_command("migrate", "clusters", "0013_live_cluster_tally", verbosity=0)
VirtualCluster.objects.create(project=b, name="unseen", zone=zone, instance_type=itype,
                              fabric_type="INFINIBAND", status="RUNNING")
back = sums()
call_command("migrate", "clusters", verbosity=0)
forward = sums()
VirtualCluster.objects.filter(name="unseen").update(status="DELETED")
print(back, forward, sums())
"""


@pytest.mark.slow
def test_the_tally_is_kept_on_the_demos_sqlite_too(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
    }
    done = run_python(SQLITE, env, timeout=300)
    expected = [("a", 1), ("b", 1)]
    kept, migrated = done.stdout.strip().splitlines()[-2:]
    assert kept == f"{expected} {expected} 2"
    assert migrated == f"{expected} {[('a', 1), ('b', 2)]} {expected}"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, 4),
        ({"status": ClusterStatus.RUNNING}, 1),
        ({"status": ClusterStatus.DELETED}, 1),
        ({"q": "d1"}, 1),
    ],
)
def test_the_lists_total_is_what_it_lists_filtered_or_not(fleet, login, query, expected):
    VirtualCluster.objects.filter(name="d2").update(zone=fleet.zone_b)
    response = login("admin").get("/clusters/", query)
    assert response.context["page"].paginator.count == expected
    in_zone_b = login("admin").get("/clusters/", {**query, "zone": fleet.zone_b.pk})
    assert in_zone_b.context["page"].paginator.count == (1 if not query else 0)
