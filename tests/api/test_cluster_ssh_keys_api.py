"""A cluster's ``ssh_key_ids`` on the API (docs/rules.md#ssh-keys): chosen at create,
shown in the detail, replaced by PATCH; another project's key is a 404 and nothing is saved,
with a rename in the same request or not."""

import pytest

from clusters.models import Operation, VirtualCluster
from portal.iam import ssh_keys
from portal.iam.permissions import Perm
from portal.models import AuditEvent
from tests.ssh_keys_data import ED25519, ED25519_OTHER

pytestmark = pytest.mark.django_db


@pytest.fixture
def keys(world):
    mine = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="mine", public_key=ED25519
    )
    second = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="second", public_key=ED25519_OTHER
    )
    theirs = ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="theirs", public_key=ED25519
    )
    return mine, second, theirs


def body(world, **extra):
    return {
        "name": "train",
        "zone_id": world.zone_a.pk,
        "instance_type_id": world.h100.pk,
        "fabric_type": "INFINIBAND",
        **extra,
    }


def test_create_with_keys_and_the_detail_shows_them(api, secrets, world, keys):
    mine, second, theirs = keys
    refused = api.post(
        "/virtual-clusters", body(world, ssh_key_ids=[mine.pk, theirs.pk]), token=secrets["admin"]
    )
    assert refused.status_code == 404 and refused.json()["code"] == "ssh_key_not_found"
    assert not VirtualCluster.objects.exists() and not Operation.objects.exists()
    made = api.post(
        "/virtual-clusters", body(world, ssh_key_ids=[second.pk, mine.pk]), token=secrets["admin"]
    )
    assert made.status_code == 202, made.content
    cluster = VirtualCluster.objects.get()
    detail = api.get(f"/virtual-clusters/{cluster.pk}", token=secrets["viewer"]).json()
    assert detail["ssh_key_ids"] == sorted([mine.pk, second.pk])
    listed = api.get("/virtual-clusters", token=secrets["viewer"]).json()["items"]
    assert "ssh_key_ids" not in listed[0]  # the detail's alone, as a VM's


def test_patch_replaces_the_keys_and_refuses_another_projects(api, secrets, world, keys):
    mine, second, theirs = keys
    cluster = world.cluster()
    url = f"/virtual-clusters/{cluster.pk}"
    changed = api.patch(url, {"ssh_key_ids": [mine.pk]}, token=secrets["operator"])
    assert changed.status_code == 200, changed.content
    assert changed.json()["ssh_key_ids"] == [mine.pk] and changed.json()["name"] == cluster.name
    refused = api.patch(url, {"ssh_key_ids": [second.pk, theirs.pk]}, token=secrets["admin"])
    assert refused.status_code == 404 and refused.json()["code"] == "ssh_key_not_found"
    assert list(cluster.ssh_keys.all()) == [mine]
    forbidden = api.patch(url, {"ssh_key_ids": []}, token=secrets["viewer"])
    assert forbidden.status_code == 403
    assert forbidden.json()["permission"] == str(Perm.CLUSTER_UPDATE)
    cleared = api.patch(url, {"ssh_key_ids": []}, token=secrets["admin"])
    assert cleared.status_code == 200 and cleared.json()["ssh_key_ids"] == []
    kinds = Operation.objects.filter(cluster=cluster).values_list("kind", flat=True)
    assert list(kinds) == [Operation.Kind.SSH_KEYS] * 2


def test_a_refusal_of_either_field_changes_neither(api, secrets, world, keys):
    mine, second, theirs = keys
    cluster, other = world.cluster("first"), world.cluster("taken")
    cluster.ssh_keys.set([mine])
    url, token = f"/virtual-clusters/{cluster.pk}", secrets["admin"]
    bad_key = api.patch(url, {"name": "renamed", "ssh_key_ids": [theirs.pk]}, token=token)
    assert bad_key.status_code == 404 and bad_key.json()["code"] == "ssh_key_not_found"
    for name, code in ((other.name, "name_taken"), ("", "name_required")):
        bad_name = api.patch(url, {"name": name, "ssh_key_ids": [second.pk]}, token=token)
        assert bad_name.status_code == 422 and bad_name.json()["code"] == code, bad_name.content
    cluster.refresh_from_db()
    assert cluster.name == "first" and list(cluster.ssh_keys.all()) == [mine]
    refusals = AuditEvent.objects.filter(target_id=cluster.pk, outcome="REFUSED")
    assert sorted(refusals.values_list("action", "code")) == [
        ("cluster.ssh_keys", "ssh_key_not_found"),
        ("cluster.update", "name_required"),
        ("cluster.update", "name_taken"),
    ]
    both = api.patch(url, {"name": "renamed", "ssh_key_ids": [second.pk]}, token=token)
    assert both.status_code == 200
    assert (both.json()["name"], both.json()["ssh_key_ids"]) == ("renamed", [second.pk])


def test_a_patch_with_nothing_to_change_is_refused(api, secrets, world):
    cluster = world.cluster()
    for sent in ({}, {"name": None}, {"ssh_key_ids": None}):
        response = api.patch(f"/virtual-clusters/{cluster.pk}", sent, token=secrets["admin"])
        assert response.status_code == 422 and response.json()["code"] == "request_invalid"
    assert not Operation.objects.exists()
