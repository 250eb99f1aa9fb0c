"""A role with the VM permissions only (no Resource.VirtualCluster.READ) follows its own VM
operations, through the API (``vc vm start --wait`` polls ``/operations/{id}``) and on the
console's operation page, without seeing cluster data: a cluster's operations stay 404 and
the page names no cluster."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from clusters.models import ClusterStatus
from clusters.operations import attach_many
from portal.iam import tokens
from portal.iam.permissions import Perm
from portal.models import Role, RoleBinding
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def vm_hand(world):
    role = Role.objects.create(name="vm-hand", permissions=[Perm.VM_READ, Perm.VM_UPDATE])
    user = get_user_model().objects.create_user("vmhand", password=PASSWORD)
    RoleBinding.objects.create(user=user, project=world.demo, role=role)
    return user


def test_a_vm_only_role_follows_its_vm_operations_but_not_the_clusters(api, world, vm_hand):
    _token, secret = tokens.issue_token(user=vm_hand, project_id=world.demo.pk, name="vm")
    cluster = world.cluster("hidden-cluster", status=ClusterStatus.RUNNING)
    member = world.members(cluster, 1)[0]
    loose = world.vm("loose")
    cluster_op = attach_many(cluster.pk, [world.vm("other-vm").pk], actor=world.admin)

    started = api.post(f"/virtual-machines/{member.pk}:start", token=secret)
    assert started.status_code == 202, started.content
    op = started.json()
    assert op["kind"] == "start_vm"
    # Which cluster the VM is in is cluster data: not told, here or in the VM's own JSON.
    assert op["cluster_id"] is None and [i["target_name"] for i in op["items"]] == [member.name]
    again = api.get(f"/operations/{op['id']}", token=secret)
    assert again.status_code == 200 and again.json()["cluster_id"] is None
    listed = api.get("/operations", token=secret).json()["items"]
    assert [item["id"] for item in listed] == [op["id"]]
    # Nor can the cluster filter be used to tell which VMs are in a cluster.
    by_cluster = api.get(f"/operations?cluster={cluster.pk}", token=secret).json()["items"]
    assert by_cluster == []
    assert api.get(f"/operations/{cluster_op.pk}", token=secret).status_code == 404
    assert api.get(f"/virtual-clusters/{cluster.pk}", token=secret).status_code == 404
    assert api.post(f"/virtual-machines/{loose.pk}:start", token=secret).status_code == 202


def test_the_operation_page_names_no_cluster_to_a_vm_only_role(client, world, vm_hand):
    from clusters.operations import start_vm_op

    cluster = world.cluster("hidden-cluster", status=ClusterStatus.RUNNING)
    member = world.members(cluster, 1, prefix="node")[0]
    operation, _vm = start_vm_op(member.pk, actor=vm_hand)
    assert operation.cluster_id == cluster.pk
    client.force_login(vm_hand)
    page = client.get(reverse("clusters:operation_detail", args=[operation.pk]))
    assert page.status_code == 200
    assert "hidden-cluster" not in page.content.decode()
    assert "가상머신 시작" in page.content.decode()  # the operation itself is there
    client.force_login(world.admin)
    page = client.get(reverse("clusters:operation_detail", args=[operation.pk]))
    assert "hidden-cluster" in page.content.decode()


def test_a_cluster_only_role_sees_no_vm_in_operations_or_validations(api, world):
    """A role that may read and change clusters but not read VMs: an Operation's items name
    VMs (and for a 검증 carry each member's verdict), so it gets none of them."""
    role = Role.objects.create(name="cluster-hand", permissions=[Perm.CLUSTER_READ])
    user = get_user_model().objects.create_user("clusterhand", password=PASSWORD)
    RoleBinding.objects.create(user=user, project=world.demo, role=role)
    _token, secret = tokens.issue_token(user=user, project_id=world.demo.pk, name="c")
    cluster = world.cluster("seen-cluster")
    operation = attach_many(cluster.pk, [world.vm("named-vm").pk], actor=world.admin)
    seen = api.get(f"/operations/{operation.pk}", token=secret).json()
    assert seen["cluster_id"] == cluster.pk and seen["items"] == []
    assert "named-vm" not in str(api.get("/operations", token=secret).json())
    refused = api.get(f"/virtual-clusters/{cluster.pk}/validations", token=secret)
    assert refused.status_code == 403 and refused.json()["permission"] == Perm.VM_READ
