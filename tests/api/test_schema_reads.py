"""Cluster and VM resources are read by their response schemas (``portal.api.schemas.read``)
from the rows a handler found: one shape, written once. What a field asks of the reader is
answered by the handler or refused by default; the members of a cluster cost two queries
whatever their number."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.api.schemas import VmOut, read
from portal.api.vms import readable_vms
from portal.foundation.errors import PermissionRequired
from portal.iam import tokens
from portal.iam.permissions import Perm
from portal.models import Role, RoleBinding
from vms.models import VirtualMachine

pytestmark = pytest.mark.django_db


def queries(api, path, token) -> tuple[int, list]:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(path, token=token)
    assert response.status_code == 200, response.content
    return len(captured), response.json()["items"]


@pytest.mark.parametrize(
    "route", ["/virtual-machines?cluster={pk}&", "/virtual-clusters/{pk}/members?"]
)
def test_a_clusters_members_cost_two_queries_at_any_size(api, secrets, world, route):
    small, large = world.cluster("small"), world.cluster("large")
    world.members(small, 2)
    world.members(large, 40)
    token = secrets["viewer"]
    api.get("/zones", token=token)  # last_used_at written: not counted below
    few, rows = queries(api, route.format(pk=small.pk) + "page_size=500", token)
    assert len(rows) == 2
    many, rows = queries(api, route.format(pk=large.pk) + "page_size=500", token)
    assert len(rows) == 40 and many == few <= 2


def test_members_of_an_empty_cluster_and_of_one_the_caller_may_not_read(api, secrets, world):
    empty, theirs = world.cluster("empty"), world.cluster("theirs", project=world.other)
    world.members(theirs, 2)
    token = secrets["viewer"]
    assert api.get(f"/virtual-clusters/{empty.pk}/members", token=token).json()["items"] == []
    for pk in (theirs.pk, 99999999):
        response = api.get(f"/virtual-clusters/{pk}/members", token=token)
        assert response.status_code == 404 and response.json()["code"] == "cluster_not_found"


def test_a_vm_reader_who_may_not_read_clusters_gets_no_members_list(api, world):
    """The VMs are readable to them, the cluster is not: a 404, never the members."""
    cluster = world.cluster("c")
    world.members(cluster, 2)
    role = Role.objects.create(name="vm-reader", permissions=[str(Perm.VM_READ)])
    RoleBinding.objects.filter(user=world.users["viewer"]).update(role=role)
    _token, secret = tokens.issue_token(
        user=world.users["viewer"], project_id=world.demo.pk, name="v"
    )
    response = api.get(f"/virtual-clusters/{cluster.pk}/members", token=secret)
    assert response.status_code == 404


def test_a_vm_names_its_cluster_only_when_told_the_reader_may_read_it(world):
    cluster = world.cluster("c")
    (member,) = world.members(cluster, 1)
    row = readable_vms(world.admin).get(pk=member.pk)
    assert read(VmOut, row).cluster_id is None  # nobody said: refused by default
    assert read(VmOut, row, clusters_visible=False).cluster_id is None
    shown = read(VmOut, row, clusters_visible=True)
    assert shown.cluster_id == cluster.pk
    assert (shown.zone, shown.instance_type) == (world.zone_a.code, world.h100.code)
    assert shown.status_label == "중지됨"


def test_a_vm_read_from_its_row_reads_as_its_model(api, secrets, world):
    """VMs are read as ``values()`` rows, not model instances: a row's creation time (to the
    microsecond, in the same form), stored error and fabric address read as the model's."""
    cluster = world.cluster("c")
    guid, ip = world.members(cluster, 2)
    VirtualMachine.objects.filter(pk=guid.pk).update(
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), fabric_guid="0xabc", fabric_lid=7
    )
    VirtualMachine.objects.filter(pk=ip.pk).update(
        created_at=datetime(1999, 12, 31, 23, 59, 59, 10, tzinfo=UTC),
        fabric_ip="10.2.0.5",
        fabric_gid_index=3,
    )
    ip.refresh_from_db()
    ip.set_error(PermissionRequired(Perm.VM_UPDATE))
    ip.save()
    items = api.get(f"/virtual-machines?cluster={cluster.pk}", token=secrets["viewer"]).json()
    read_back = {item["id"]: item for item in items["items"]}
    assert read_back[guid.pk]["created_at"] == "2026-01-02T03:04:05+00:00"
    assert read_back[ip.pk]["created_at"] == "1999-12-31T23:59:59.000010+00:00"
    for vm in VirtualMachine.objects.filter(cluster=cluster):
        item = read_back[vm.pk]
        assert datetime.fromisoformat(item["created_at"]) == vm.created_at
        assert item["fabric_address"] == vm.fabric_address
        error = vm.last_error
        assert item["last_error"] == (error and {"code": error.code, "message": error.message})
    assert read_back[ip.pk]["last_error"]["code"] == "permission_required"
