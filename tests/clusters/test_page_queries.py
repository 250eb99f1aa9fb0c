"""The queries of the console's heavy pages, pinned: the same at any size, and no more than
the page needs beyond the floor (the session and the user with their roles)."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters import tally
from clusters.forms import ClusterFilterForm
from clusters.models import ClusterStatus, Operation, VirtualCluster
from clusters.models.validation import ValidationRun, ValidationVerdict, Verdict
from vms.models import VmStatus

FLOOR = ['"django_session"', '"auth_user"']
# The pinned query lists are PostgreSQL's: on SQLite the user's grants are a query of their
# own.
GRANTS = "the user's grants come with their row by json_agg"
PINNED = pytest.mark.postgres_only(f"the pinned query list: {GRANTS}")
PINNED_LIST = PINNED


def tables(client, url) -> list[str]:
    """Per query, the table of the first column it names (``"table"."column"``)."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return [re.search(r'("\w+")\."', q["sql"]).group(1) for q in captured]


@PINNED_LIST
def test_the_cluster_list_reads_its_rows_with_their_count_at_any_size(world, login):
    client = login("admin")
    for i in range(10):
        world.members(world.cluster(f"s{i:03d}"), 2)
    first = tables(client, "/clusters/")
    few = tables(client, "/clusters/")
    for i in range(10, 130):
        world.cluster(f"s{i:03d}")
    many = tables(client, "/clusters/?page=2")
    # The zone filter's choices are read on every request (nothing kept between requests).
    assert first == few == many == [*FLOOR, '"clusters_virtualcluster"', '"vms_zone"']


@PINNED_LIST
def test_a_page_past_the_end_is_the_last_page_for_one_count_and_one_read_more(world, login):
    client = login("admin")
    for i in range(60):
        world.cluster(f"s{i:03d}")
    client.get("/clusters/")
    past = tables(client, "/clusters/?page=9")
    assert past == [*FLOOR, *['"clusters_virtualcluster"'] * 3, '"vms_zone"']
    page = client.get("/clusters/?page=9").content.decode()
    assert "2 / 2" in page and "s000" in page and "s059" not in page


# The detail tabs: the cluster (with the id of an operation still running on it, if one
# is, and of its last finished 검증), its members once (the rows, and the statuses the
# header's rules count), and nothing more: 정보 offers 이름 변경 for the cluster's own name,
# which no other live cluster can hold; 연결된 가상머신 reads verdicts only after a 검증, and
# every member's host keys (its SSH 접속 block) in one query; 정보 reads the cluster's SSH
# keys and, for SSH 키 변경, the keys its project offers.
TAB_QUERIES = {
    "": ['"portal_sshkey"', '"portal_sshkey"'],
    # The rows' health is their own columns (``vms.health``): no query of the agents' tokens.
    "vms/": ['"vms_hostkey"'],
}


@PINNED
@pytest.mark.parametrize("tab", TAB_QUERIES)
def test_a_detail_tab_reads_the_same_at_2_and_at_64_members(world, login, tab):
    small, big = (
        world.cluster("small", status=ClusterStatus.RUNNING),
        world.cluster("big", status=ClusterStatus.RUNNING),
    )
    world.members(small, 2, status=VmStatus.RUNNING)
    world.members(big, 64, status=VmStatus.RUNNING)
    client = login("operator")
    few = tables(client, f"/clusters/{small.pk}/{tab}")
    assert few == tables(client, f"/clusters/{big.pk}/{tab}")
    assert few == [*FLOOR, '"clusters_virtualcluster"', '"vms_virtualmachine"', *TAB_QUERIES[tab]]


@PINNED
@pytest.mark.parametrize("tab", TAB_QUERIES)
def test_a_detail_tab_reads_the_running_operation_only_while_one_runs(world, login, tab):
    """The header names a running operation with its counts: read then, and only then (and
    on 연결된 가상머신, which rows it has not reached yet)."""
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    world.members(cluster, 2, status=VmStatus.STOPPED)
    client = login("operator")
    idle = tables(client, f"/clusters/{cluster.pk}/{tab}")
    Operation.objects.create(project=cluster.project, cluster=cluster, kind=Operation.Kind.START_VM)
    busy = tables(client, f"/clusters/{cluster.pk}/{tab}")
    assert '"clusters_operation"' not in idle
    queued = ['"clusters_operationitem"'] if tab == "vms/" else []
    assert busy == [*idle[:4], '"clusters_operation"', *queued, *idle[4:]]
    assert "header-operation" in client.get(f"/clusters/{cluster.pk}/{tab}").content.decode()


def test_a_member_the_user_may_not_read_is_counted_in_the_header_but_not_listed(world, login):
    """The header's rules count every member; the rows are those the reader may read."""
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    stranger = world.vm("elsewhere", project=world.other, cluster=cluster, status=VmStatus.STOPPED)
    page = login("admin").get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert page.count("data-vm=") == 2 and stranger.name not in page
    assert "실행중 멤버 2/3" in page


def test_the_list_as_it_opens_has_an_index_in_its_order():
    """A project's clusters in the list's default order, with the status its filter reads:
    a page, a deep page's OFFSET and the count are read from the index alone, prepared or
    not (bench_pages shows it; a planner test on a table this small would show only the
    planner's guesses)."""
    index = next(i for i in VirtualCluster._meta.indexes if i.name == "cluster_newest")
    order = [term.replace("pk", "id") for term in ClusterFilterForm().ordering()]
    assert index.fields == ["project", *order]
    assert list(index.include) == ["status"]


def test_the_members_tab_reads_the_verdicts_of_the_last_run_in_one_query(world, login):
    """After a 검증, the run is known from the cluster's read: its verdicts are one query,
    and the row shows the last run's verdict, not an earlier one's."""
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    first, second = world.members(cluster, 2, status=VmStatus.RUNNING)
    client = login("operator")
    before = tables(client, f"/clusters/{cluster.pk}/vms/")
    for verdict, minutes in ((Verdict.OK, 30), (Verdict.BAD, 5)):
        at = timezone.now() - timedelta(minutes=minutes)
        check = Operation.objects.create(
            project=cluster.project, cluster=cluster, kind=Operation.Kind.VALIDATE, finished_at=at
        )
        Operation.objects.filter(pk=check.pk).update(created_at=at)
        run = ValidationRun.objects.create(operation=check, finished_at=at)
        ValidationVerdict.objects.create(run=run, vm=first, vm_name=first.name, verdict=verdict)

    after = tables(client, f"/clusters/{cluster.pk}/vms/")
    # The SSH 접속 block, after the rows.
    assert before[-1:] == ['"vms_hostkey"']
    assert after == [*before[:-1], '"clusters_validationverdict"', *before[-1:]]
    rows = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    cells = dict(re.findall(r'data-vm="([\w-]+)">.*?class="verdict"[^>]*>(.*?)</td>', rows))
    assert f'data-verdict="{Verdict.BAD}"' in cells[first.name]
    # A member the last run did not judge (it joined after) says so.
    assert cells[second.name] == '<span class="muted">검증 안 됨</span>'


@pytest.mark.postgres_only(
    "PostgreSQL's prepared statements and their plans (DEALLOCATE, pg_prepared_statements)"
)
def test_the_list_statement_keeps_one_plan_for_a_small_project(world, login):
    """PostgreSQL plans a prepared statement with the request's values five times, then
    keeps a plan made without them unless the values' own plans looked cheaper. A page's
    ids read as ``IN (subquery)`` were estimated by the average project's size, so beside
    a large project a small one's own plan always looked cheaper and every list request
    was planned anew, and planning took longer than running it."""
    client = login("admin")
    for i in range(3):
        world.members(world.cluster(f"s{i}"), 2)
    VirtualCluster.objects.bulk_create(
        VirtualCluster(
            project=world.other, name=f"o{i}", zone=world.zone_a, instance_type=world.h100
        )
        for i in range(3000)
    )
    tally.merge()  # as beat does every minute: a row per project
    with connection.cursor() as cursor:
        # What earlier tests prepared on this connection goes (psycopg forgets it too).
        cursor.execute("DEALLOCATE ALL")
        cursor.execute("ANALYZE clusters_virtualcluster")
        cursor.execute("ANALYZE vms_virtualmachine")
        cursor.execute("ANALYZE clusters_liveclustertally")
    # psycopg prepares a statement on its sixth run: then five plans with the values, and
    # from there one plan kept or a plan made anew each time.
    for _ in range(20):
        assert client.get("/clusters/").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            ['SELECT "clusters_virtualcluster"."id" AS "id"%'],
        )
        (generic, custom), *others = cursor.fetchall()
    assert not others and (custom, generic) == (5, 10)
