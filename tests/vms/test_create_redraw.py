"""Forms keep what the user chose: a zone or type change redraws only the choices that depend
on it (the types, billing types and clusters offered, the fabrics), never the name; the
cluster chosen stays chosen when the zone changes and is refused beside its field; 스팟 is
not offered beside a cluster; instance types are named with what they are."""

import re

from django.urls import reverse

from portal.catalog.models import FabricType
from portal.foundation import errors
from tests.pages import HX
from vms.models import BillingType


def redraw(client, **params):
    response = client.get(reverse("vms:vm_create"), {"redraw": "1", **params}, **HX)
    assert response.status_code == 200
    return response.content.decode()


def options(page, select_id):
    found = re.search(
        rf'<select id="{select_id}" hx-swap-oob="innerHTML">(.*?)</select>', page, re.S
    )
    assert found is not None, f"{select_id} is not redrawn"
    return found.group(1)


def test_a_redraw_is_the_dependent_choices_only(world, login):
    page = redraw(login("admin"), name="typed", zone=world.zone_a.pk)
    assert 'name="name"' not in page and "typed" not in page and 'name="count"' not in page
    assert 'id="vm-ssh-keys"' not in page
    for select in ("id_instance_type", "id_billing_type", "id_cluster"):
        options(page, select)
    assert '<div id="cluster-notes" hx-swap-oob="true">' in page
    page = (
        login("admin")
        .get(
            reverse("clusters:cluster_form_options"),
            {"name": "typed", "zone": world.zone_a.pk, "instance_type": world.l40s.pk},
            **HX,
        )
        .content.decode()
    )
    assert 'name="name"' not in page and "typed" not in page
    assert 'value="ROCE_V2"' in options(page, "id_fabric_type")
    assert "gpu.l40sx4" in options(page, "id_instance_type")


def test_the_chosen_cluster_stays_when_the_zone_changes_and_says_why_it_is_refused(world, login):
    cluster = world.cluster("target")  # kr-central-1a, gpu.h100x8
    client = login("admin")
    page = redraw(client, zone=world.zone_a.pk, instance_type=world.h100.pk, cluster=cluster.pk)
    assert re.search(rf'<option value="{cluster.pk}" selected>target', options(page, "id_cluster"))
    assert 'id="cluster-refusal"' not in page
    page = redraw(client, zone=world.zone_b.pk, instance_type=world.h100.pk, cluster=cluster.pk)
    assert re.search(rf'<option value="{cluster.pk}" selected>target', options(page, "id_cluster"))
    refusal = re.search(
        r'<p class="field-error" id="cluster-refusal" role="alert">([^<]*)</p>', page
    )
    assert refusal is not None
    assert refusal.group(1) == errors.VmInOtherZone(zone="kr-central-1b").message


def test_spot_is_not_offered_beside_a_cluster(world, login):
    cluster = world.cluster("target")
    client = login("admin")
    chosen = dict(zone=world.zone_a.pk, instance_type=world.h100.pk)
    billing = options(redraw(client, **chosen), "id_billing_type")
    assert re.search(r'<option value="SPOT">스팟</option>', billing)
    billing = options(redraw(client, **chosen, cluster=cluster.pk), "id_billing_type")
    assert re.search(
        r'<option value="SPOT" disabled>스팟 \(클러스터에 연결할 수 없음\)</option>', billing
    )
    # A spot chosen before the cluster stays chosen, and the cluster's field says why.
    page = redraw(client, **chosen, cluster=cluster.pk, billing_type=BillingType.SPOT)
    assert '<option value="SPOT" selected>스팟</option>' in options(page, "id_billing_type")
    assert errors.SpotOrDrVm().message in page.split('id="cluster-notes"')[1]


def test_which_clusters_are_listed_is_said_once_a_zone_and_type_are_chosen(world, login):
    world.cluster("target")
    client = login("admin")
    page = client.get(reverse("vms:vm_create")).content.decode()
    assert "가용 영역과 인스턴스 유형을 고르면 연결할 수 있는 클러스터가 보입니다." in page
    assert "선택한 영역·인스턴스 유형의 클러스터만 보입니다" not in page
    page = redraw(client, zone=world.zone_a.pk, instance_type=world.h100.pk)
    assert "선택한 영역·인스턴스 유형의 클러스터만 보입니다" in page
    page = redraw(client, zone=world.zone_a.pk, instance_type=world.l40s.pk)
    assert "선택한 영역·인스턴스 유형에 연결할 수 있는 클러스터가 없습니다." in page


def test_instance_types_are_named_with_their_gpus_cpus_and_memory(world, login):
    client = login("admin")
    summary = "gpu.h100x8 · 8× H100 · 192 vCPU · 2048 GiB"
    assert summary in client.get(reverse("vms:vm_create")).content.decode()
    page = client.get(
        reverse("clusters:cluster_form_options"), {"zone": world.zone_a.pk}, **HX
    ).content.decode()
    assert summary in page
    assert FabricType.INFINIBAND not in options(page, "id_fabric_type")  # no type chosen yet
