"""One door per change: whichever surface a change comes from — a console page, the API,
the admin — it goes through the same ``clusters.operations`` entry and leaves the same
Operation (the 활동 tab and ``GET /api/v1/operations`` show it), and a refusal is the same
answer on every surface."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from clusters.models import ClusterStatus, Operation, VirtualCluster
from portal.models import AuditEvent
from vms.models import VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db


def kinds_listed(api, secrets, cluster=None) -> list[str]:
    query = f"?cluster={cluster.pk}" if cluster is not None else ""
    listed = api.get(f"/operations{query}", token=secrets["admin"]).json()["items"]
    return [op["kind"] for op in listed]


def test_a_console_cluster_start_stop_and_delete_leave_operations(
    api, world, secrets, login, django_capture_on_commit_callbacks
):
    cluster = world.cluster("door")
    world.members(cluster, 2)
    client = login("admin")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("clusters:cluster_start", args=[cluster.pk]))
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    client.post(reverse("clusters:cluster_stop", args=[cluster.pk]))
    client.post(reverse("clusters:cluster_delete", args=[cluster.pk]))
    assert kinds_listed(api, secrets, cluster) == [
        Operation.Kind.DELETE_CLUSTER,
        Operation.Kind.STOP_CLUSTER,
        Operation.Kind.START_CLUSTER,
    ]
    start = Operation.objects.get(kind=Operation.Kind.START_CLUSTER)
    assert (start.actor, start.done, start.last_error) == (world.admin, True, None)
    activity = client.get(reverse("clusters:cluster_activity", args=[cluster.pk])).content
    assert "클러스터 시작" in activity.decode()


def test_console_vm_changes_leave_operations(
    api, world, secrets, login, django_capture_on_commit_callbacks
):
    cluster = world.cluster("door")
    world.members(cluster, 2)
    vm = world.vm("loose")
    client = login("admin")
    for action in ("vms:vm_start", "vms:vm_stop"):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse(action, args=[vm.pk]))
    client.post(reverse("vms:vm_edit", args=[vm.pk]), {"name": "renamed"})
    client.post(
        reverse("vms:vm_cluster", args=[vm.pk]), {"action": "attach", "cluster": cluster.pk}
    )
    client.post(reverse("vms:vm_cluster", args=[vm.pk]), {"action": "detach"})
    client.post(reverse("vms:vm_delete", args=[vm.pk]))
    vm.refresh_from_db()
    assert (vm.name, vm.status) == ("renamed", VmStatus.DELETED)
    kinds = list(
        Operation.objects.filter(items__vm=vm).order_by("pk").values_list("kind", flat=True)
    )
    assert kinds == [
        Operation.Kind.START_VM,
        Operation.Kind.STOP_VM,
        Operation.Kind.RENAME_VM,
        Operation.Kind.ATTACH,
        Operation.Kind.DETACH,
        Operation.Kind.DELETE_VM,
    ]
    assert set(kinds) <= set(kinds_listed(api, secrets))


def test_a_console_create_leaves_the_operation_the_api_create_does(
    world, login, django_capture_on_commit_callbacks
):
    form = {"zone": world.zone_a.pk, "instance_type": world.h100.pk, "fabric_type": "INFINIBAND"}
    with django_capture_on_commit_callbacks(execute=True):
        login("admin").post(reverse("clusters:cluster_create"), {"name": "by-page", **form})
    cluster = VirtualCluster.objects.get(name="by-page")
    operation = Operation.objects.get(kind=Operation.Kind.CREATE_CLUSTER)
    assert (operation.cluster, operation.done) == (cluster, True)
    vm_form = {"zone": world.zone_a.pk, "instance_type": world.h100.pk}
    vm_form.update(billing_type="ON_DEMAND", count=1, name="one-vm")
    login("admin").post(reverse("vms:vm_create"), vm_form)
    vm = VirtualMachine.objects.get(name="one-vm")
    assert Operation.objects.get(kind=Operation.Kind.CREATE_VMS).items.get().vm == vm


def test_an_admin_start_leaves_an_operation(world, client):
    cluster = world.cluster("door")
    world.members(cluster, 2)
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    client.post(
        reverse("admin:clusters_virtualcluster_changelist"),
        {"action": "start", "_selected_action": [cluster.pk]},
    )
    assert Operation.objects.get(cluster=cluster).kind == Operation.Kind.START_CLUSTER


def test_api_renames_leave_operations(api, world, secrets):
    cluster = world.cluster("door")
    vm = world.vm("loose")
    assert (
        api.patch(
            f"/virtual-clusters/{cluster.pk}", {"name": "new"}, token=secrets["admin"]
        ).json()["name"]
        == "new"
    )
    api.patch(f"/virtual-machines/{vm.pk}", {"name": "new-vm"}, token=secrets["admin"])
    assert kinds_listed(api, secrets) == [Operation.Kind.RENAME_VM, Operation.Kind.UPDATE]


def test_a_refused_change_leaves_no_operation_on_either_surface(api, world, secrets, login):
    """A refusal removes the claim: the console and the API answer it alike, and record it
    only as the refused audit event."""
    lonely = world.cluster("lonely")
    response = login("admin").post(reverse("clusters:cluster_start", args=[lonely.pk]))
    assert response.status_code == 409
    assert (
        api.post(f"/virtual-clusters/{lonely.pk}:start", token=secrets["admin"]).status_code == 409
    )
    assert not Operation.objects.exists()
    assert AuditEvent.objects.filter(action="cluster.start", outcome="REFUSED").count() == 2


@pytest.mark.parametrize("change", ["attach", "detach", "start_members", "stop_members"])
def test_a_bulk_change_without_vm_update_is_one_refusal_on_both_surfaces(
    api, world, secrets, login, change
):
    """The console and the API give one answer to who may read the cluster but not update
    its VMs: 403 naming the permission, no Operation, no item, one audited refusal."""
    cluster = world.cluster("door", status=ClusterStatus.RUNNING)
    member, _other = world.members(cluster, 2)
    loose = world.vm("loose")
    console = {
        "attach": ("clusters:cluster_attach", {"vm": [loose.pk]}),
        "detach": ("clusters:cluster_detach", {"vm": [member.pk]}),
        "start_members": ("clusters:cluster_start_members", {}),
        "stop_members": ("clusters:cluster_stop_members", {}),
    }
    url, data = console[change]
    page = login("viewer").post(reverse(url, args=[cluster.pk]), data)
    assert page.status_code == 403 and "Resource.VirtualMachine.UPDATE" in page.content.decode()
    if change in ("attach", "detach"):
        api_call = {
            "attach": lambda: api.post(
                f"/virtual-clusters/{cluster.pk}/members",
                {"vm_ids": [loose.pk]},
                token=secrets["viewer"],
            ),
            "detach": lambda: api.delete(
                f"/virtual-clusters/{cluster.pk}/members/{member.pk}", token=secrets["viewer"]
            ),
        }[change]
        answer = api_call()
        assert answer.status_code == 403
        assert answer.json()["permission"] == "Resource.VirtualMachine.UPDATE"
    assert not Operation.objects.exists()
    refused = AuditEvent.objects.filter(action=f"operation.{change}", outcome="REFUSED")
    assert refused.count() == (2 if change in ("attach", "detach") else 1)
