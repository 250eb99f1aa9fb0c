"""The queries of the console's heavy pages, pinned: the same at any size, and no more than
the page needs beyond the floor (the session and the user with their roles)."""

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import ClusterStatus as S
from vms.models import VmStatus

FLOOR = ['"django_session"', '"auth_user"']


def tables(client, url) -> list[str]:
    """Per query, the table of the first column it names (``"table"."column"``)."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return [re.search(r'("\w+")\."', q["sql"]).group(1) for q in captured]


def test_the_cluster_list_reads_count_rows_and_zones_at_any_size(world, login):
    client = login("admin")
    for i in range(10):
        world.members(world.cluster(f"s{i:03d}"), 2)
    few = tables(client, "/clusters/")
    for i in range(10, 130):
        world.cluster(f"s{i:03d}")
    many = tables(client, "/clusters/?page=2")
    assert few == many
    assert many == [*FLOOR, '"clusters_virtualcluster"', '"clusters_virtualcluster"', '"vms_zone"']


def test_the_info_tab_reads_the_cluster_and_its_members_once(world, login):
    small, big = world.cluster("small", status=S.RUNNING), world.cluster("big", status=S.RUNNING)
    world.members(small, 2, status=VmStatus.RUNNING)
    world.members(big, 64, status=VmStatus.RUNNING)
    client = login("admin")
    few = tables(client, f"/clusters/{small.pk}/")
    assert few == tables(client, f"/clusters/{big.pk}/")
    # the members' statuses for the header come from the same read as the rows; the header
    # asks whether an operation is running on the cluster (it then offers no contradicting
    # action); 이름 변경 is offered only where the rename rule allows it (one indexed read)
    assert few == [
        *FLOOR,
        '"clusters_virtualcluster"',
        '"vms_virtualmachine"',
        '"clusters_operation"',
        '"clusters_virtualcluster"',
    ]


def test_the_members_tab_reads_the_cluster_its_members_and_the_last_verdicts(world, login):
    small, big = world.cluster("small", status=S.RUNNING), world.cluster("big", status=S.RUNNING)
    world.members(small, 2)
    world.members(big, 64)
    client = login("operator")
    few = tables(client, f"/clusters/{small.pk}/vms/")
    assert few == tables(client, f"/clusters/{big.pk}/vms/")
    assert few == [
        *FLOOR,
        '"clusters_virtualcluster"',
        '"vms_virtualmachine"',
        '"clusters_operation"',
        '"clusters_validationrun"',
    ]


def test_a_member_the_user_may_not_read_is_counted_in_the_header_but_not_listed(world, login):
    """The header's rules count every member; the rows are those the reader may read."""
    cluster = world.cluster("c", status=S.RUNNING)
    world.members(cluster, 2, status=VmStatus.RUNNING)
    stranger = world.vm("elsewhere", project=world.other, cluster=cluster, status=VmStatus.STOPPED)
    page = login("admin").get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert page.count("data-vm=") == 2 and stranger.name not in page
    assert "실행중 멤버 2/3" in page
