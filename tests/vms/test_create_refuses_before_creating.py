"""VM create with 생성 후 클러스터에 연결 asks the attach rule first (spot/DR, zone, type) and
refuses the whole request with the rule's message, creating nothing; the form's cluster list
narrows with the chosen zone and type."""

import pytest
from django.urls import reverse

from clusters import operations
from clusters.models import Operation
from portal.catalog.models import FabricType
from portal.foundation import errors
from portal.models import AuditEvent
from vms.models import BillingType, VirtualMachine

HX = {"HTTP_HX_REQUEST": "true"}


def form(world, cluster, **extra):
    return {
        "name": "batch",
        "zone": world.zone_a.pk,
        "instance_type": world.h100.pk,
        "billing_type": BillingType.ON_DEMAND,
        "count": 2,
        "cluster": cluster.pk,
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"billing_type": BillingType.SPOT}, errors.SpotOrDrVm),
        ({"disaster_recovery": True}, errors.SpotOrDrVm),
        ({"zone": "b"}, errors.VmInOtherZone),
        ({"instance_type": "l40s"}, errors.VmOfOtherInstanceType),
    ],
)
def test_create_into_a_cluster_is_refused_whole_before_any_vm_is_made(world, extra, error):
    cluster = world.cluster("target")
    fields = {
        "billing_type": BillingType.ON_DEMAND,
        "disaster_recovery": False,
        "zone_id": world.zone_a.pk,
        "instance_type_id": world.h100.pk,
    }
    if "billing_type" in extra:
        fields["billing_type"] = extra["billing_type"]
    if "disaster_recovery" in extra:
        fields["disaster_recovery"] = True
    if extra.get("zone") == "b":
        fields["zone_id"] = world.zone_b.pk
    if extra.get("instance_type") == "l40s":
        fields["instance_type_id"] = world.l40s.pk
    with pytest.raises(error):
        operations.create_vms(
            actor=world.admin,
            project=world.demo,
            name="batch",
            count=3,
            cluster_id=cluster.pk,
            **fields,
        )
    assert not VirtualMachine.objects.exists()
    assert not Operation.objects.exists()
    refused = AuditEvent.objects.get(action="operation.create_vms")
    assert refused.outcome == AuditEvent.Outcome.REFUSED and refused.code == error.code


def test_the_form_says_the_rules_message_and_nothing_is_created(world, login):
    cluster = world.cluster("target")
    client = login("admin")
    response = client.post(
        reverse("vms:vm_create"), form(world, cluster, billing_type=BillingType.SPOT), **HX
    )
    assert response.status_code == 422
    page = response.content.decode()
    # Beside the cluster field, whose choice it refuses.
    notes = page.split('<div id="cluster-notes">')[1].split("</div>")[0]
    assert errors.SpotOrDrVm().message in notes and 'id="create-refused"' not in page
    assert not VirtualMachine.objects.exists() and not Operation.objects.exists()
    # A cluster of another zone (a stale form) is refused by the rule, not "not a choice".
    response = client.post(reverse("vms:vm_create"), form(world, cluster, zone=world.zone_b.pk))
    assert response.status_code == 422
    assert "다른 가용 영역(kr-central-1b)의 가상머신은 이 클러스터에 연결할 수 없습니다" in (
        response.content.decode()
    )
    assert not VirtualMachine.objects.exists()


def test_an_eligible_create_into_a_cluster_still_attaches(world, login):
    cluster = world.cluster("target")
    world.vm("batch")  # the base name is taken; batch-01 and batch-02 are not
    response = login("admin").post(reverse("vms:vm_create"), form(world, cluster))
    assert response.status_code == 302
    assert sorted(cluster.members.values_list("name", flat=True)) == ["batch-01", "batch-02"]


def test_the_cluster_list_narrows_with_the_zone_and_type(world, login):
    world.cluster("a-h100")
    world.cluster("b-h100", zone=world.zone_b)
    world.cluster("a-l40s", instance_type=world.l40s, fabric_type=FabricType.ROCE_V2)
    client = login("admin")
    page = client.get(reverse("vms:vm_create")).content.decode()
    assert all(name in page for name in ("a-h100", "b-h100", "a-l40s"))
    assert "개수" in page and "개수:" not in page and "이름:" not in page  # no colons
    assert 'type="number"' in page
    # A redraw is the choices only, for the live selects: never the name or the count.
    narrowed = client.get(
        reverse("vms:vm_create"),
        {"redraw": "1", "zone": world.zone_a.pk, "instance_type": world.h100.pk, "name": "x"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'id="create-fields"' not in narrowed and "<html" not in narrowed
    assert 'name="name"' not in narrowed and 'name="count"' not in narrowed
    assert '<select id="id_cluster" hx-swap-oob="innerHTML">' in narrowed
    assert "a-h100" in narrowed and "b-h100" not in narrowed and "a-l40s" not in narrowed
    narrowed = client.get(
        reverse("vms:vm_create"), {"redraw": "1", "zone": world.zone_b.pk}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "b-h100" in narrowed and "a-h100" not in narrowed
