"""The admin shows everything, edits the catalog, and changes status only through services."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from clusters.models import ClusterStatus
from portal.models import AuditEvent
from vms.models import VmStatus


@pytest.fixture
def root(world, client):
    user = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(user)
    return client


def test_every_admin_changelist_renders(root):
    from django.contrib import admin

    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        assert root.get(url).status_code == 200, url


def test_cluster_status_is_read_only_and_actions_call_the_services(
    world, root, django_capture_on_commit_callbacks
):
    empty = world.cluster("empty")
    ready = world.cluster("ready")
    world.members(ready, 2)
    url = reverse("admin:clusters_virtualcluster_changelist")
    page = root.get(reverse("admin:clusters_virtualcluster_change", args=[ready.pk]))
    assert b'name="status"' not in page.content  # shown, not editable
    with django_capture_on_commit_callbacks(execute=True):
        response = root.post(
            url, {"action": "start", "_selected_action": [empty.pk, ready.pk]}, follow=True
        )
    assert "가상머신 2대 이상이 필요합니다" in response.content.decode()
    ready.refresh_from_db()
    empty.refresh_from_db()
    assert ready.status == ClusterStatus.RUNNING and empty.status == ClusterStatus.UNALLOCATED
    assert AuditEvent.objects.filter(action="cluster.start", outcome="REFUSED").count() == 1


def test_force_reconcile_finishes_a_stuck_start_and_a_stuck_vm(world, root):
    from clusters import services

    cluster = world.cluster()
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.admin)  # its task is never run
    root.post(
        reverse("admin:clusters_virtualcluster_changelist"),
        {"action": "force_reconcile", "_selected_action": [cluster.pk]},
    )
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    vm = world.vm("stuck", status=VmStatus.STOPPING)
    root.post(
        reverse("admin:vms_virtualmachine_changelist"),
        {"action": "force_reconcile", "_selected_action": [vm.pk]},
    )
    vm.refresh_from_db()
    assert vm.status == VmStatus.STOPPED


def test_a_clusters_zone_type_and_fabric_are_fixed_in_the_admin(world, root):
    cluster = world.cluster("fixed")
    fixed = (cluster.zone_id, cluster.instance_type_id, cluster.fabric_type)
    url = reverse("admin:clusters_virtualcluster_change", args=[cluster.pk])
    page = root.get(url).content.decode()
    for field in ("zone", "instance_type", "fabric_type"):
        assert f'name="{field}"' not in page  # shown, not editable
    response = root.post(
        url,
        {
            "zone": world.zone_b.pk,
            "instance_type": world.l40s.pk,
            "fabric_type": "ROCE_V2" if cluster.fabric_type != "ROCE_V2" else "INFINIBAND",
            "members-TOTAL_FORMS": "0",
            "members-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code in (302, 403)  # saved without them, or refused whole
    cluster.refresh_from_db()
    assert (cluster.zone_id, cluster.instance_type_id, cluster.fabric_type) == fixed
