"""Compiled statements (``portal.speed.statements``): a page read compiled once per shape returns
what the ORM reads, for every filter, sort, page and reader; binds each request's own values
(none is kept and replayed for another); and goes through the ORM where a parameter is made
from an input."""

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.forms import ClusterFilterForm
from clusters.models import ClusterStatus, VirtualCluster
from clusters.views.listing import LIST_FIELDS, listed_clusters, shown_clusters
from portal.iam.permissions import Perm
from portal.models import readable, readable_row
from portal.speed.statements import Statements, statements
from portal.web.listing import Rows, _read_page, list_page
from vms.models import VmStatus

pytestmark = pytest.mark.django_db
STATUSES = [ClusterStatus.RUNNING, ClusterStatus.UNALLOCATED, ClusterStatus.DELETED]


@pytest.fixture
def clusters(world):
    """Seven clusters in demo and three in other, of both zones and three statuses, some
    with members; the cache starts empty."""
    statements.clear()
    for i in range(7):
        cluster = world.cluster(
            f"alpha-{i}", status=STATUSES[i % 3], zone=world.zone_a if i % 2 else world.zone_b
        )
        world.members(cluster, i % 3, status=VmStatus.STOPPED)
    for i in range(3):
        world.cluster(f"beta-{i}", project=world.other, status=STATUSES[i % 3])
    return world


def as_tuples(rows):
    return [tuple(getattr(row, f) for f in (*LIST_FIELDS, "_list_total")) for row in rows]


def compiled_and_orm(values, sort, number, per_page=3):
    ordering = ClusterFilterForm({"sort": sort}).ordering()
    rows = Rows(VirtualCluster, listed_clusters, values)
    compiled = list_page(rows, ordering, number, shown_clusters, per_page, LIST_FIELDS)
    orm = _read_page(rows.queryset(), ordering, shown_clusters, number, per_page, LIST_FIELDS)
    return as_tuples(compiled.object_list), as_tuples(orm), compiled


def test_every_filter_sort_and_page_reads_what_the_orm_reads(clusters):
    world = clusters
    readers = [None, (world.demo.pk,), (world.demo.pk, world.other.pk), (world.other.pk,)]
    seen = 0
    for projects, status, zone, sort, number in itertools.product(
        readers,
        [None, ClusterStatus.RUNNING, ClusterStatus.DELETED],
        [None, world.zone_a.pk],
        ["-created", "name", "-zone", "status"],
        [1, 2, 3],
    ):
        values = {
            "projects": projects,
            "project": world.demo.pk,
            "status": status,
            "zone": zone,
            "q": None,
        }
        compiled, orm, page = compiled_and_orm(values, sort, number)
        if page.number == number:  # a page past the end shows the last: compared there
            assert compiled == orm, (values, sort, number)
            seen += len(compiled)
    assert seen > 100
    # The readers' kinds (every project, 1 and 2 projects) x the statuses' (none, one) x
    # the zones' x 4 sorts x the first page or another; the values themselves and the
    # page past the first are bound.
    assert (statements.compiles, statements.refused) == (3 * 2 * 2 * 4 * 2, 0)


def test_a_shape_compiles_once_and_then_binds_each_requests_values(clusters):
    world = clusters
    values = dict(projects=(world.demo.pk,), project=world.demo.pk, status=None, zone=None, q=None)
    with CaptureQueriesContext(connection) as first:
        one, _o, _page = compiled_and_orm(values, "name", 1)
    assert statements.compiles == 1
    with CaptureQueriesContext(connection) as second:
        two, _o, _page = compiled_and_orm(values, "name", 2)
    assert statements.compiles == 2  # the first page has no OFFSET: a statement of its own
    compiled_and_orm(values, "name", 3)
    assert statements.compiles == 2  # past it, the page is a parameter (OFFSET)
    assert "OFFSET" not in first[0]["sql"] and "OFFSET" in second[0]["sql"]
    assert first[0]["sql"].split("LIMIT")[0] == second[0]["sql"].split("LIMIT")[0]
    # The query's own constant is in the text, where a generic plan can see it.
    assert "'DELETED'" in first[0]["sql"]
    assert len(one) == 3 and len(two) == 2 and not set(one) & set(two)


def test_no_readers_projects_are_kept_for_another_reader(clusters, login):
    """The demo admin lists first (compiling the shape), then the other project's admin,
    with a project list of the same length: each sees their own clusters only."""
    demo = login("admin").get("/clusters/").content.decode()
    assert "alpha-0" in demo and "beta-0" not in demo
    other = login("other").get("/clusters/").content.decode()
    assert "beta-0" in other and "alpha-0" not in other
    assert statements.compiles == 2  # the page, and the zone filter's choices


def test_a_parameter_made_from_an_input_goes_through_the_orm(clusters):
    """``name__icontains`` binds a LIKE pattern made from ``q``: not compiled ahead, and each
    search still finds its own rows."""
    world = clusters
    base = dict(projects=None, project=world.demo.pk, status=None, zone=None)
    found, orm, _page = compiled_and_orm({**base, "q": "alpha-1"}, "name", 1)
    assert found == orm and [row[2] for row in found] == ["alpha-1"]
    found, orm, _page = compiled_and_orm({**base, "q": "alpha-4"}, "name", 1)
    assert found == orm and [row[2] for row in found] == ["alpha-4"]
    assert (statements.compiles, statements.refused) == (0, 1)


def test_a_reader_of_no_project_reads_nothing_without_a_query(clusters):
    values = dict(projects=(), project=clusters.demo.pk, status=None, zone=None, q=None)
    ordering = ClusterFilterForm({}).ordering()
    rows = Rows(VirtualCluster, listed_clusters, values)
    with CaptureQueriesContext(connection) as queries:
        page = list_page(rows, ordering, 1, shown_clusters, 3, LIST_FIELDS)
    assert list(page.object_list) == [] and page.paginator.count == 0
    assert all("LIMIT" not in query["sql"] for query in queries)


def test_a_builder_or_part_that_closes_over_a_value_is_refused():
    kept = Statements()
    project = 1

    def closes(shape, **values):
        return VirtualCluster.objects.filter(project=project).values_list("pk")

    with pytest.raises(TypeError):
        kept.rows(closes, ())
    with pytest.raises(TypeError):
        kept.rows(_names, (lambda rows: rows.filter(project=project),), status=None)


def test_the_oldest_shape_gives_way_to_a_new_one(clusters):
    kept = Statements(kept=1)
    kept.rows(_names, (), status=ClusterStatus.RUNNING)
    kept.rows(_names, (), status=ClusterStatus.UNALLOCATED)  # the same shape: bound anew
    assert kept.compiles == 1
    kept.rows(_names, (), status=None)  # another shape, which takes the only place
    assert kept.compiles == 2
    assert kept.rows(_names, (), status=ClusterStatus.DELETED) == [("alpha-2",), ("alpha-5",)]
    assert kept.compiles == 3


def _names(shape, status):
    rows = VirtualCluster.objects.filter(name__startswith="alpha")
    return (rows.filter(status=status) if status else rows).order_by("name").values_list("name")


def test_a_constant_is_written_into_the_text_quoted(world):
    """A constant with a quote and a percent sign reads the row it names, and only it."""
    statements.clear()
    world.cluster("it's 100%")
    world.cluster("it")
    assert statements.rows(_odd_name, ()) == [("it's 100%",)]
    assert statements.compiles == 1


def _odd_name(shape):
    return VirtualCluster.objects.filter(name="it's 100%").values_list("name")


def test_the_zone_filter_offers_what_its_form_field_accepts(clusters, login):
    """The compiled zone choices are the filter field's own: every zone, as its str, in the
    catalog's order."""
    from html import unescape

    page = login("admin").get("/clusters/").content.decode()
    select = page.split('name="zone" id="filter_zone">')[1].split("</select>")[0]
    form = ClusterFilterForm({})
    expected = [(str(z.pk), str(z)) for z in form.fields["zone"].queryset]
    offered = [
        (option.split('"')[1], unescape(option.split(">")[1].split("<")[0]))
        for option in select.split("<option ")[1:]
    ]
    assert offered[0] == ("", "모든 영역") and offered[1:] == expected and len(expected) == 2


# Model instances: the cluster every cluster page starts with, and the members it reads.


def _as_read(cluster):
    """What a page reads of a cluster: its fields, the related objects ``select_related``
    set, and the open operation annotation."""
    return (
        {f.attname: getattr(cluster, f.attname) for f in VirtualCluster._meta.concrete_fields},
        cluster.zone.code,
        cluster.instance_type.code,
        cluster.project.slug,
        cluster.created_by and cluster.created_by.username,
        cluster.open_operation_id,
    )


def test_a_readable_row_is_what_get_or_404_finds_for_every_reader(clusters):
    """``readable_row`` against ``readable(...).get_or_404`` for every kind of reader and
    every cluster (their own, another project's, none), with the page's related objects
    set and no query more when the page uses them."""
    from django.contrib.auth.models import AnonymousUser

    from clusters.views.members import _page_cluster
    from portal.foundation.errors import ClusterNotFound

    world = clusters
    superuser = get_user_model().objects.create_superuser("root", password="x-pass-1234")
    readers = [None, superuser, AnonymousUser(), *world.users.values()]
    ids = [*VirtualCluster.objects.values_list("pk", flat=True), 10**6, "7x", 10**30]
    found = 0
    for reader, pk in itertools.product(readers, ids):
        try:
            expected = _page_cluster(readable(reader, Perm.CLUSTER_READ, VirtualCluster))
            expected = _as_read(expected.get_or_404(pk))
        except ClusterNotFound:
            expected = None
        row = readable_row(reader, Perm.CLUSTER_READ, VirtualCluster, pk, _page_cluster)
        with CaptureQueriesContext(connection) as queries:
            assert (row and _as_read(row)) == expected, (reader, pk)
        assert len(queries) == 0
        found += row is not None
    assert found > 20
    # Shapes: every project (the system, the superuser), 1 project, none (no SQL run).
    assert statements.compiles <= 3


def test_compiled_instances_hold_no_readers_values_for_the_next(clusters):
    """Two readers with project lists of the same length share a statement, each bound to
    their own projects: neither reads the other's cluster."""
    world = clusters
    alpha = VirtualCluster.objects.get(name="alpha-0")
    beta = VirtualCluster.objects.get(name="beta-0")
    admin, other = world.users["admin"], world.users["other"]
    assert readable_row(admin, Perm.CLUSTER_READ, VirtualCluster, alpha.pk) == alpha
    assert readable_row(other, Perm.CLUSTER_READ, VirtualCluster, alpha.pk) is None
    assert readable_row(other, Perm.CLUSTER_READ, VirtualCluster, beta.pk) == beta
    assert readable_row(admin, Perm.CLUSTER_READ, VirtualCluster, beta.pk) is None
    assert statements.compiles == 1


def test_compiled_instances_take_no_prefetch(clusters):
    kept = Statements()
    with pytest.raises(TypeError):
        kept.instances(_prefetching, ())


def _prefetching(shape):
    return VirtualCluster.objects.prefetch_related("members")


def test_the_members_tab_reads_its_members_compiled(clusters, login):
    """The tab's members and the header poll's counts come from compiled statements, and
    show the rows the ORM reads."""
    world = clusters
    cluster = world.cluster("gamma", status=ClusterStatus.RUNNING)
    world.members(cluster, 3, status=VmStatus.RUNNING)
    client = login("admin")
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert all(f'data-vm="gamma-m{i}"' in page for i in range(3))
    compiled = statements.compiles
    other = world.cluster("delta", status=ClusterStatus.RUNNING)
    world.members(other, 2, status=VmStatus.RUNNING)
    page = client.get(f"/clusters/{other.pk}/vms/").content.decode()
    assert 'data-vm="delta-m1"' in page and 'data-vm="gamma-m0"' not in page
    assert statements.compiles == compiled  # the second cluster bound the same statements
