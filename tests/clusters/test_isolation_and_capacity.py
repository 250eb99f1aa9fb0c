"""Regressions from review: project isolation in the admin and on cluster pages, capacity
that never leaks or overcommits, unique fabric addresses, odd digits in ids."""

import pytest
from django.contrib.auth.models import Permission
from kombu.exceptions import OperationalError as KombuOperationalError

from clusters import progress, services
from clusters.models import ClusterStatus
from portal.compute.models import SimulatorAllocation
from portal.foundation import errors
from portal.models import Role, RoleBinding
from vms import services as vm_services
from vms.models import VmStatus


def test_staff_see_only_their_projects_in_the_admin(world, client, django_user_model):
    staff = django_user_model.objects.create_user("ops", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_virtualcluster", "view_virtualmachine", "view_auditevent"]
        )
    )
    RoleBinding.objects.create(
        user=staff, project=world.demo, role=Role.objects.get(name="operator")
    )
    secret = world.cluster("other-secret", project=world.other)
    world.vm("other-vm-secret", project=world.other)
    world.cluster("mine")
    client.force_login(staff)
    page = client.get("/admin/clusters/virtualcluster/").content.decode()
    assert "mine" in page and "other-secret" not in page
    assert "other-vm-secret" not in client.get("/admin/vms/virtualmachine/").content.decode()
    assert client.get(f"/admin/clusters/virtualcluster/{secret.pk}/change/").status_code == 302


def test_cluster_pages_show_members_only_with_vm_read(world, client, django_user_model):
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    world.members(cluster, 3, prefix="hidden-node-")
    user = django_user_model.objects.create_user("clusters-only")
    role = Role.objects.create(name="clusters-only", permissions=["Resource.VirtualCluster.READ"])
    RoleBinding.objects.create(user=user, project=world.demo, role=role)
    client.force_login(user)
    services.detach_vm(cluster.members.first().pk, actor=world.admin)  # an event naming a VM
    for url in ("vms/", "hostfile/", "activity/"):
        assert "hidden-node-" not in client.get(f"/clusters/{cluster.pk}/{url}").content.decode()


def test_a_release_that_never_reached_the_broker_is_done_by_the_reconciler(
    world, monkeypatch, django_capture_on_commit_callbacks
):
    from clusters import tasks

    world.capacity(2)
    cluster = world.cluster()
    world.members(cluster, 2)
    with django_capture_on_commit_callbacks(execute=True):
        services.start_cluster(cluster.pk, actor=world.admin)

    def broker_down(*args, **kwargs):
        raise KombuOperationalError("broker down")

    monkeypatch.setattr(tasks.release_cluster, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        services.stop_cluster(cluster.pk, actor=world.admin)
    assert SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()
    progress.reconcile()
    assert not SimulatorAllocation.objects.filter(cluster_id=cluster.pk).exists()


def test_attaching_to_a_running_cluster_reserves_a_node(world, django_capture_on_commit_callbacks):
    world.capacity(2)
    cluster = world.cluster()
    world.members(cluster, 2)
    with django_capture_on_commit_callbacks(execute=True):
        services.start_cluster(cluster.pk, actor=world.admin)
    extra = world.vm("extra")
    with pytest.raises(errors.CapacityUnavailable):
        services.attach_vm(extra.pk, cluster.pk, actor=world.admin)
    extra.refresh_from_db()
    assert extra.cluster_id is None


def test_fabric_addresses_stay_unique_as_members_come_and_go(
    world, django_capture_on_commit_callbacks
):
    cluster = world.cluster()
    m0, m1, m2 = world.members(cluster, 3)
    run = django_capture_on_commit_callbacks
    with run(execute=True):
        services.start_cluster(cluster.pk, actor=world.admin)
    services.detach_vm(m0.pk, actor=world.admin)
    late = world.vm("late")
    services.attach_vm(late.pk, cluster.pk, actor=world.admin)
    for vm in (m1, m2, late):
        with run(execute=True):
            vm_services.start_vm(vm.pk, actor=world.admin)
    lids = list(
        cluster.members.filter(status=VmStatus.RUNNING).values_list("fabric_lid", flat=True)
    )
    assert len(lids) == 3 and len(set(lids)) == 3


@pytest.mark.parametrize("value", ["²", "١", "𝟙"])
def test_unicode_digits_in_ids_are_not_a_500(world, login, value):
    client = login("admin")
    assert (
        client.get(f"/clusters/new/options/?zone={value}&instance_type={value}").status_code == 200
    )
    assert client.get(f"/vms/new/?zone={value}", HTTP_HX_REQUEST="true").status_code == 200
    response = client.post(
        "/clusters/new/", {"name": "x", "zone": value, "instance_type": value, "fabric_type": "X"}
    )
    assert response.status_code == 422


def test_deleted_clusters_are_hidden_unless_asked_for(world, login):
    world.cluster("gone", status=ClusterStatus.DELETED)
    client = login("admin")
    assert "gone" not in client.get("/clusters/").content.decode()
    assert "gone" in client.get("/clusters/?status=DELETED").content.decode()
