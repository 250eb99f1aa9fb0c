"""A change its caller may not make at all is refused whole, before any item is made: one
403 problem+json, no Operation, at most one audit row (as the console refuses it)."""

import pytest

from clusters.models import Operation
from portal.iam.permissions import Perm
from portal.models import AuditEvent
from tests.api.bodies import vm_body

pytestmark = pytest.mark.django_db


def _refused_once(response, permission):
    assert response.status_code == 403, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["permission"] == permission


@pytest.mark.parametrize("path", ["members", "members/{vm}"])
def test_a_viewer_attach_or_detach_writes_no_operation(api, world, secrets, path):
    cluster = world.cluster("whole")
    member = world.members(cluster, 1)[0]
    vms = [world.vm(f"v{i}").pk for i in range(3)]
    ids = vms + list(range(10_000, 10_497))  # 500 targets, most of them naming no VM
    events = AuditEvent.objects.count()
    url = f"/virtual-clusters/{cluster.pk}/{path.format(vm=member.pk)}"
    if path == "members":
        response = api.post(url, {"vm_ids": ids}, token=secrets["viewer"])
    else:
        response = api.delete(url, token=secrets["viewer"])
    _refused_once(response, Perm.VM_UPDATE)
    assert not Operation.objects.exists()
    assert AuditEvent.objects.count() - events <= 1
    member.refresh_from_db()
    assert member.cluster_id == cluster.pk


def test_creating_spot_vms_into_a_cluster_is_refused_whole_and_creates_nothing(api, world, secrets):
    """The attach rule is asked before the VMs are made: the rule's code and message, no VM,
    no Operation (nothing billable left behind)."""
    from vms.models import VirtualMachine

    cluster = world.cluster("c")
    body = vm_body(world, name="spot", count=2, billing_type="SPOT", cluster_id=cluster.pk)
    response = api.post("/virtual-machines", body, token=secrets["admin"])
    assert response.status_code == 409 and response.json()["code"] == "spot_or_dr_vm"
    assert not VirtualMachine.objects.filter(name__startswith="spot").exists()
    assert not Operation.objects.exists()
