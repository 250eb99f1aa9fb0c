"""Lists that scale: filters and sort in the URL, a whitelist of sort keys, bad values
ignored (never a 500), and the cluster list's query count flat in its size."""

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import ClusterStatus, VirtualCluster
from portal.templatetags.console import short_time
from vms.models import BillingType, VirtualMachine, VmStatus

HX = {"HTTP_HX_REQUEST": "true"}


def body(response):
    assert response.status_code == 200
    return response.content.decode()


def names(page, attr):
    """Row names in the order shown: ``data-vm`` for VMs, the link text for clusters."""
    if attr == "vm":
        return re.findall(r'data-vm="([^"]+)"', page)
    return re.findall(r'<tr><td><a href="/clusters/\d+/">([^<]+)</a>', page)


@pytest.fixture
def vms(world):
    cluster = world.cluster("zeta-cluster")
    world.vm("b-node", status=VmStatus.RUNNING, cluster=cluster)
    world.vm("a-node", zone=world.zone_b, billing_type=BillingType.RESERVED)
    world.vm("c-node", instance_type=world.l40s)
    world.vm("gone", status=VmStatus.DELETED)
    world.vm("elsewhere", project=world.other)
    return cluster


def test_vm_list_filters_by_status_zone_type_cluster_and_name(world, login, vms):
    client = login("admin")
    assert names(body(client.get("/vms/")), "vm") == ["a-node", "b-node", "c-node"]
    cases = {
        "status=RUNNING": ["b-node"],
        f"zone={world.zone_b.pk}": ["a-node"],
        f"instance_type={world.l40s.pk}": ["c-node"],
        f"cluster={vms.pk}": ["b-node"],
        "cluster=none": ["a-node", "c-node"],
        "q=C-NO": ["c-node"],
        f"status=STOPPED&zone={world.zone_a.pk}": ["c-node"],
    }
    for query, expected in cases.items():
        assert names(body(client.get(f"/vms/?{query}")), "vm") == expected, query


def test_vm_list_sorts_by_each_whitelisted_column_both_ways(world, login, vms):
    client = login("admin")
    expected = {
        "name": ["a-node", "b-node", "c-node"],
        "status": ["a-node", "c-node", "b-node"],  # lifecycle order: 중지됨 before 실행중
        "zone": ["b-node", "c-node", "a-node"],  # then by creation (pk)
        "type": ["b-node", "a-node", "c-node"],
        "billing": ["b-node", "c-node", "a-node"],
        "cluster": ["b-node", "a-node", "c-node"],  # VMs in no cluster last
    }
    for key, rows in expected.items():
        assert names(body(client.get(f"/vms/?sort={key}")), "vm") == rows, key
        assert names(body(client.get(f"/vms/?sort=-{key}")), "vm") == rows[::-1], key


def test_bad_filter_and_sort_values_are_ignored_never_a_500(world, login, vms):
    client = login("admin")
    other_cluster = world.cluster("theirs", project=world.other)
    bad = [
        "sort=password",
        "sort=-project__name",
        "sort=--name",
        "sort=",
        "status=<script>",
        "zone=abc",
        "instance_type=999999",
        f"cluster={other_cluster.pk}",
        "cluster=../../",
        "q=" + "x" * 500,
        "page=zz",
        f"page={10**20}",  # an OFFSET past a bigint: the last page, never a DataError
    ]
    for query in bad:
        assert names(body(client.get(f"/vms/?{query}")), "vm") == ["a-node", "b-node", "c-node"]
    # one bad field does not drop the good one
    assert names(body(client.get("/vms/?zone=abc&status=RUNNING")), "vm") == ["b-node"]
    for query in ("sort=evil", "sort=-members", "status=NOPE&zone=x", "page=-1", f"page={2**62}"):
        assert client.get(f"/clusters/?{query}").status_code == 200


def test_vm_cluster_filter_offers_only_readable_clusters_with_vms(world, login, vms):
    world.cluster("empty-cluster")
    page = body(login("admin").get("/vms/"))
    select = re.search(r'<select name="cluster".*?</select>', page, re.S).group(0)
    assert "zeta-cluster" in select and "empty-cluster" not in select
    assert "클러스터 없음" in select


def test_filters_and_sort_stay_in_the_urls_of_sort_links_pager_and_poll(world, login, vms):
    for i in range(55):
        world.vm(f"bulk-{i:02d}", status=VmStatus.STARTING)
    page = body(login("admin").get("/vms/?status=STARTING&sort=-name"))
    # the sort link of another column keeps the filter and drops the page
    assert 'href="/vms/?status=STARTING&amp;sort=zone"' in page
    # the current column's link turns the order around, and says how it is sorted now
    assert 'href="/vms/?status=STARTING&amp;sort=name"' in page
    assert 'aria-sort="descending"' in page
    # the pager and the 2-second poll keep both
    assert 'href="?status=STARTING&amp;sort=-name&page=2"' in page
    assert 'hx-get="/vms/?status=STARTING&amp;sort=-name"' in page
    # the sort in force goes with the filter form when a filter changes
    assert '<input type="hidden" name="sort" value="-name" form="vm-filters">' in page
    rows = names(page, "vm")
    assert rows[0] == "bulk-54" and len(rows) == 50


def test_cluster_list_sorts_by_each_whitelisted_column(world, login):
    world.cluster("bravo", status=ClusterStatus.RUNNING, zone=world.zone_b)
    world.cluster("alpha", instance_type=world.l40s)
    world.cluster("charlie", status=ClusterStatus.TERMINATED)
    client = login("admin")
    assert names(body(client.get("/clusters/")), "c") == ["charlie", "alpha", "bravo"]  # newest
    assert names(body(client.get("/clusters/?sort=name")), "c") == ["alpha", "bravo", "charlie"]
    assert names(body(client.get("/clusters/?sort=-name")), "c") == ["charlie", "bravo", "alpha"]
    assert names(body(client.get("/clusters/?sort=zone")), "c") == ["alpha", "charlie", "bravo"]
    assert names(body(client.get("/clusters/?sort=type")), "c") == ["bravo", "charlie", "alpha"]
    assert names(body(client.get("/clusters/?sort=created")), "c") == ["bravo", "alpha", "charlie"]
    # lifecycle order: 미할당, 실행중, 종료됨
    assert names(body(client.get("/clusters/?sort=status")), "c") == ["alpha", "bravo", "charlie"]
    page = body(client.get(f"/clusters/?zone={world.zone_a.pk}&sort=name"))
    assert names(page, "c") == ["alpha", "charlie"]
    assert f'href="/clusters/?zone={world.zone_a.pk}&amp;sort=-name"' in page


@pytest.mark.parametrize("sort", ["", "name", "-status", "zone", "-type", "fabric", "created"])
@pytest.mark.postgres_only("the member count's = ANY(ARRAY(…)) is PostgreSQL's SQL")
def test_cluster_list_query_count_is_flat_for_every_sort(world, login, sort):
    """Small and large lists make the same queries, whatever the sort: it pages over ids and
    annotates only the rows shown."""
    client = login("admin")
    for i in range(10):
        world.members(world.cluster(f"s{i:03d}"), 1) if i < 2 else world.cluster(f"s{i:03d}")
    client.get(f"/clusters/?sort={sort}")  # warm the session
    with CaptureQueriesContext(connection) as small:
        client.get(f"/clusters/?sort={sort}")
    for i in range(10, 130):
        world.cluster(f"s{i:03d}", zone=world.zone_b if i % 2 else world.zone_a)
    with CaptureQueriesContext(connection) as large:
        page = body(client.get(f"/clusters/?sort={sort}&page=2"))
    assert len(large) == len(small)
    assert page.count('<td class="num" data-label="멤버">') == 50
    counting = [q["sql"] for q in large if '"vms_virtualmachine"' in q["sql"]]
    counting = [sql for sql in counting if "COUNT(" in sql and "clusters_virtualcluster" in sql]
    # the member count runs for the ids of the page (= ANY(ARRAY(… LIMIT 50))), not over
    # the OFFSET
    assert counting and all(" = ANY(ARRAY(SELECT" in sql for sql in counting)


def test_htmx_sort_and_filter_answer_only_the_table(world, login, vms):
    client = login("admin")
    page = body(client.get("/vms/?sort=status", **HX, HTTP_HX_TARGET="vm-table"))
    assert page.lstrip().startswith('<div id="vm-table"') and "<html" not in page
    page = body(client.get("/clusters/?sort=name", **HX, HTTP_HX_TARGET="cluster-table"))
    assert page.lstrip().startswith('<div id="cluster-table"') and "<html" not in page


def test_a_user_who_may_not_read_clusters_cannot_sort_by_their_names(world, login, vms):
    from portal.iam.permissions import Perm
    from portal.models import Role, RoleBinding

    role = Role.objects.create(name="vm-reader", permissions=[Perm.VM_READ])
    RoleBinding.objects.filter(user=world.users["viewer"]).update(role=role)
    world.cluster("aaa-first").members.add(VirtualMachine.objects.get(name="c-node"))
    page = body(login("viewer").get("/vms/?sort=cluster"))
    assert names(page, "vm") == ["a-node", "b-node", "c-node"]  # by name: the default
    assert 'href="/vms/?sort=cluster"' not in page and "zeta-cluster" not in page


def test_vm_cluster_choices_are_bounded_and_queries_flat(world, login):
    """A project of thousands of clusters must not make a select of thousands of options."""
    from vms.forms import VmFilterForm

    client = login("admin")
    for i in range(3):
        world.members(world.cluster(f"k{i:03d}"), 1)
    client.get("/vms/")
    with CaptureQueriesContext(connection) as few:
        client.get("/vms/")
    limit = VmFilterForm.CLUSTER_CHOICES
    for i in range(3, limit + 5):
        world.members(world.cluster(f"k{i:03d}"), 1)
    with CaptureQueriesContext(connection) as many:
        page = body(client.get("/vms/"))
    assert len(many) == len(few)
    select = re.search(r'<select name="cluster".*?</select>', page, re.S).group(0)
    assert select.count("<option") == limit + 2 and "k104" not in select
    # one further down, asked for by its URL, is offered selected and filters the list
    last = VirtualMachine.objects.get(name="k104-m0").cluster
    page = body(client.get(f"/vms/?cluster={last.pk}"))
    assert f'<option value="{last.pk}" selected>k104</option>' in page
    assert names(page, "vm") == ["k104-m0"]


def test_a_cluster_row_shows_when_it_was_made_in_the_portals_time_zone(world, login):
    """Stored in UTC, shown in the portal's zone (Asia/Seoul, UTC+9): late evening in UTC is
    the next morning on the page."""
    cluster = world.cluster("late")
    made = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
    VirtualCluster.objects.filter(pk=cluster.pk).update(created_at=made)

    page = body(login("viewer").get("/clusters/"))

    row = re.search(r"<tr><td><a[^>]*>late</a>.*?</tr>", page).group()
    assert '<td data-label="생성일">2026-03-02 08:30</td>' in row
    with timezone.override("UTC"):
        assert short_time(made) == "2026-03-01 23:30"
        assert short_time(made, ZoneInfo("Asia/Seoul")) == "2026-03-02 08:30"
    assert short_time(None) == "-"
