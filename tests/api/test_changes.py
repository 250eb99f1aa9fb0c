"""Changes through the API: 202 with the Operation, the rule's own code and message on a
refusal (409/422, Korean by default, English on request), Idempotency-Key."""

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import ClusterStatus, Operation, VirtualCluster
from clusters.operations.internal import MAX_TARGETS
from portal.foundation.errors import MembersStillRunning, NotEnoughMembers, SpotOrDrVm
from tests.api.bodies import cluster_body, vm_body
from vms.models import BillingType, VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db


def test_a_change_answers_202_and_the_resource_already_shows_it(api, world, secrets):
    cluster = world.cluster("go")
    world.members(cluster, 2)
    response = api.post(f"/virtual-clusters/{cluster.pk}:start", token=secrets["operator"])
    assert response.status_code == 202
    operation = response.json()
    assert (operation["kind"], operation["cluster_id"], operation["done"]) == (
        "start_cluster",
        cluster.pk,
        False,
    )
    assert (
        api.get(f"/virtual-clusters/{cluster.pk}", token=secrets["viewer"]).json()["status"]
        == ClusterStatus.PROVISIONING
    )
    again = api.get(f"/operations/{operation['id']}", token=secrets["viewer"]).json()
    assert again["id"] == operation["id"]
    listed = api.get(f"/operations?cluster={cluster.pk}", token=secrets["viewer"]).json()
    assert [op["id"] for op in listed["items"]] == [operation["id"]]


@pytest.mark.parametrize("language", ["ko", "en"])
def test_rule_refusals_are_409_with_the_rules_code_and_message(api, world, secrets, language):
    from django.utils import translation

    lonely = world.cluster("lonely")
    world.members(lonely, 1)
    busy = world.cluster("busy", status=ClusterStatus.RUNNING)
    world.members(busy, 2, status=VmStatus.RUNNING)
    headers = {"Accept-Language": language}
    before = sorted(VirtualCluster.objects.values_list("pk", "status"))
    start = api.post(
        f"/virtual-clusters/{lonely.pk}:start", token=secrets["admin"], headers=headers
    )
    stop = api.post(f"/virtual-clusters/{busy.pk}:stop", token=secrets["admin"], headers=headers)
    with translation.override(language):
        assert (start.status_code, start.json()["code"], start.json()["detail"]) == (
            409,
            "not_enough_members",
            NotEnoughMembers().message,
        )
        assert (stop.status_code, stop.json()["code"], stop.json()["detail"]) == (
            409,
            "members_still_running",
            MembersStillRunning().message,
        )
    assert start["Content-Type"] == "application/problem+json"
    assert sorted(VirtualCluster.objects.values_list("pk", "status")) == before
    assert not Operation.objects.exists()


def test_stop_members_first(api, world, secrets):
    busy = world.cluster("busy", status=ClusterStatus.RUNNING)
    world.members(busy, 2, status=VmStatus.RUNNING)
    response = api.post(
        f"/virtual-clusters/{busy.pk}:stop", {"stop_members": True}, token=secrets["operator"]
    )
    assert response.status_code == 202
    assert [i["status"] for i in response.json()["items"]] == ["PENDING", "PENDING"]


def test_attach_is_one_operation_with_an_item_per_vm(api, world, secrets):
    cluster = world.cluster("c")
    good = world.vm("good")
    spot = world.vm("spot", billing_type=BillingType.SPOT)
    response = api.post(
        f"/virtual-clusters/{cluster.pk}/members",
        {"vm_ids": [good.pk, spot.pk]},
        token=secrets["operator"],
    )
    assert response.status_code == 202
    body = response.json()
    assert body["done"] is True and body["kind"] == "attach"
    assert [(i["vm_id"], i["status"]) for i in body["items"]] == [
        (good.pk, "SUCCEEDED"),
        (spot.pk, "FAILED"),
    ]
    assert body["items"][1]["error"] == {"code": "spot_or_dr_vm", "message": SpotOrDrVm().message}
    assert list(cluster.members.values_list("name", flat=True)) == ["good"]
    detach = api.delete(
        f"/virtual-clusters/{cluster.pk}/members/{good.pk}", token=secrets["operator"]
    )
    assert detach.json()["items"][0]["status"] == "SUCCEEDED"
    assert not cluster.members.exists()


def test_an_attach_takes_max_targets_vms_and_refuses_one_more_whole(api, world, secrets):
    """One limit, the operation's (``MAX_TARGETS``): the OpenAPI document states it, a request
    at it is taken (an item per id), one past it is refused whole with the operation's own
    Korean error, and nothing is attached."""
    assert _attach_schema()["properties"]["vm_ids"]["maxItems"] == MAX_TARGETS
    cluster = world.cluster("c")
    good = world.vm("good")
    url = f"/virtual-clusters/{cluster.pk}/members"
    ids = [good.pk, *range(10_000, 10_000 + MAX_TARGETS)]  # the others name no VM
    over = api.post(url, {"vm_ids": ids}, token=secrets["operator"])
    assert over.status_code == 422
    problem = over.json()
    assert (problem["code"], problem["field"]) == ("too_many_targets", "vm_ids")
    assert problem["detail"] == f"한 번에 최대 {MAX_TARGETS}대까지 처리할 수 있습니다."
    assert not Operation.objects.exists() and not cluster.members.exists()
    at = api.post(url, {"vm_ids": ids[:MAX_TARGETS]}, token=secrets["operator"])
    assert at.status_code == 202
    assert len(at.json()["items"]) == MAX_TARGETS
    assert list(cluster.members.values_list("name", flat=True)) == ["good"]


def _attach_schema():
    from tests.api.conftest import openapi_document

    return openapi_document()["components"]["schemas"]["AttachIn"]


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"name": "bad name!"}, "name_invalid", "name"),
        ({"name": ""}, "name_required", "name"),
        ({"instance_type_id": 10**30}, "instance_type_required", "instance_type_id"),
        ({"fabric_type": "TOKEN_RING"}, "fabric_type_required", "fabric_type"),
        ({"zone_id": "x"}, "request_invalid", "zone_id"),
    ],
)
def test_invalid_input_is_422_naming_the_field(api, world, secrets, body, code, field):
    response = api.post("/virtual-clusters", cluster_body(world, **body), token=secrets["admin"])
    assert response.status_code == 422, response.content
    assert (response.json()["code"], response.json()["field"]) == (code, field)
    assert not VirtualCluster.objects.exists()


def test_a_body_that_is_not_json_is_422(api, world, secrets):
    response = api.client.post(
        "/api/v1/virtual-clusters",
        data="{nope",
        content_type="application/json",
        headers={"Authorization": f"Bearer {secrets['admin']}"},
    )
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"


def test_the_same_idempotency_key_answers_the_first_operation(api, world, secrets):
    key = {"Idempotency-Key": "create-1"}
    first = api.post("/virtual-clusters", cluster_body(world), token=secrets["admin"], headers=key)
    again = api.post("/virtual-clusters", cluster_body(world), token=secrets["admin"], headers=key)
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert VirtualCluster.objects.count() == 1
    other = api.post(
        "/virtual-clusters", cluster_body(world, name="api-d"), token=secrets["admin"], headers=key
    )
    assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")
    assert VirtualCluster.objects.count() == 1
    # Past 24 hours the key is spent: a new key is needed.
    Operation.objects.filter(pk=first.json()["id"]).update(
        created_at=timezone.now() - timedelta(hours=25)
    )
    late = api.post("/virtual-clusters", cluster_body(world), token=secrets["admin"], headers=key)
    assert (late.status_code, late.json()["code"]) == (422, "idempotency_key_expired")
    assert late.json()["detail"] == (
        "이 Idempotency-Key는 24시간이 지나 다시 쓸 수 없습니다. 새 키를 쓰세요."
    )
    assert VirtualCluster.objects.count() == 1


def test_idempotency_keys_are_each_users_own(api, world, secrets):
    key = {"Idempotency-Key": "shared"}
    api.post("/virtual-clusters", cluster_body(world), token=secrets["admin"], headers=key)
    theirs = api.post("/virtual-clusters", cluster_body(world), token=secrets["other"], headers=key)
    assert theirs.status_code == 202
    assert VirtualCluster.objects.filter(project=world.other).count() == 1


def test_an_idempotency_key_is_scoped_to_the_project_and_route(api, world, secrets):
    """One user's token per project: the same key and body in another project is another
    request (a cluster there, not the first project's Operation); so is the same key on
    another route, while the same route with another target is still a reused key."""
    from portal.iam import tokens
    from portal.models import Role, RoleBinding

    admin = world.users["admin"]
    RoleBinding.objects.create(user=admin, project=world.other, role=Role.objects.get(name="admin"))
    _t, in_other = tokens.issue_token(user=admin, project_id=world.other.pk, name="o")
    key = {"Idempotency-Key": "same-key"}
    first = api.post("/virtual-clusters", cluster_body(world), token=secrets["admin"], headers=key)
    second = api.post("/virtual-clusters", cluster_body(world), token=in_other, headers=key)
    assert first.status_code == second.status_code == 202
    assert second.json()["id"] != first.json()["id"]
    assert VirtualCluster.objects.filter(project=world.other, name="api-c").count() == 1
    assert VirtualCluster.objects.filter(project=world.demo, name="api-c").count() == 1
    vm_a, vm_b = world.vm("scoped-a"), world.vm("scoped-b")
    started = api.post(f"/virtual-machines/{vm_a.pk}:start", token=secrets["admin"], headers=key)
    assert started.status_code == 202 and started.json()["kind"] == "start_vm"
    other_vm = api.post(f"/virtual-machines/{vm_b.pk}:start", token=secrets["admin"], headers=key)
    assert (other_vm.status_code, other_vm.json()["code"]) == (422, "idempotency_key_reused")
    vm_b.refresh_from_db()
    assert vm_b.status == VmStatus.STOPPED


def test_a_bad_idempotency_key_is_422(api, world, secrets):
    response = api.post(
        "/virtual-clusters",
        cluster_body(world),
        token=secrets["admin"],
        headers={"Idempotency-Key": "x" * 101},
    )
    assert (response.status_code, response.json()["field"]) == (422, "Idempotency-Key")


def test_a_session_cookie_cannot_write(api, world):
    api.client.force_login(world.admin)
    assert api.post("/virtual-clusters", cluster_body(world)).status_code == 401
    assert not VirtualCluster.objects.exists()


def test_vms_create_many_rename_and_name_taken(api, world, secrets):
    cluster = world.cluster("c")
    body = vm_body(world, name="n", count=2, cluster_id=cluster.pk)
    response = api.post("/virtual-machines", body, token=secrets["admin"])
    assert response.status_code == 202
    assert [i["target_name"] for i in response.json()["items"]] == ["n-01", "n-02"]
    assert sorted(cluster.members.values_list("name", flat=True)) == ["n-01", "n-02"]
    vm = VirtualMachine.objects.get(name="n-01")
    renamed = api.patch(f"/virtual-machines/{vm.pk}", {"name": "m"}, token=secrets["operator"])
    assert (renamed.status_code, renamed.json()["name"]) == (200, "m")
    taken = api.patch(f"/virtual-machines/{vm.pk}", {"name": "n-02"}, token=secrets["operator"])
    assert (taken.status_code, taken.json()["code"], taken.json()["field"]) == (
        422,
        "vm_name_taken",
        "name",
    )


def test_cluster_rename_by_patch_keeps_the_name_rules(api, world, secrets):
    cluster = world.cluster("old-name")
    world.cluster("taken")
    response = api.patch(
        f"/virtual-clusters/{cluster.pk}", {"name": "new-name"}, token=secrets["admin"]
    )
    assert response.status_code == 200 and response.json()["name"] == "new-name"
    refused = api.patch(
        f"/virtual-clusters/{cluster.pk}", {"name": "taken"}, token=secrets["admin"]
    )
    assert refused.status_code == 422 and refused.json()["code"] == "name_taken"
    viewer = api.patch(f"/virtual-clusters/{cluster.pk}", {"name": "x-y"}, token=secrets["viewer"])
    assert viewer.status_code == 403
    cluster.refresh_from_db()
    assert cluster.name == "new-name"


def test_a_patch_naming_a_clusters_zone_type_or_fabric_changes_only_its_name(api, world, secrets):
    cluster = world.cluster("fixed")
    fixed = (cluster.zone_id, cluster.instance_type_id, cluster.fabric_type)
    response = api.patch(
        f"/virtual-clusters/{cluster.pk}",
        {
            "name": "renamed",
            "zone_id": world.zone_b.pk,
            "instance_type_id": world.l40s.pk,
            "fabric_type": "ROCE_V2" if cluster.fabric_type != "ROCE_V2" else "INFINIBAND",
        },
        token=secrets["admin"],
    )
    assert response.status_code in (200, 422), response.content
    cluster.refresh_from_db()
    assert (cluster.zone_id, cluster.instance_type_id, cluster.fabric_type) == fixed
