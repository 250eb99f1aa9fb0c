"""A cluster holds SSH keys of its own project (docs/rules.md#ssh-keys): chosen at create,
changed on the 정보 tab (CLUSTER UPDATE); another project's key is not found and nothing is
saved; a key deleted from the registry drops out."""

import pytest
from django.urls import reverse

from clusters import operations
from clusters.models import ClusterStatus, Operation, VirtualCluster
from portal.foundation.errors import InvalidTransition, PermissionRequired
from portal.foundation.errors.ssh_keys import SshKeyNotFound
from portal.iam import ssh_keys
from portal.models import AuditEvent
from tests.ssh_keys_data import (
    ED25519,
    ED25519_FINGERPRINT,
    ED25519_OTHER,
    ED25519_OTHER_FINGERPRINT,
)

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
NOTE = "변경은 각 멤버가 다음에 시작할 때 적용됩니다."


@pytest.fixture
def keys(world):
    """Two keys of demo and one of other (the same text as demo's first: another row)."""
    laptop = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="laptop", public_key=ED25519
    )
    desktop = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="desktop", public_key=ED25519_OTHER
    )
    theirs = ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="theirs", public_key=ED25519
    )
    return laptop, desktop, theirs


def create(world, **extra):
    return operations.create_cluster_op(
        actor=world.admin,
        project=world.demo,
        name=extra.pop("name", "train"),
        zone_id=world.zone_a.pk,
        instance_type_id=world.h100.pk,
        fabric_type="INFINIBAND",
        **extra,
    )


def chosen(cluster):
    return sorted(cluster.ssh_keys.values_list("name", flat=True))


def test_a_cluster_holds_the_keys_chosen_at_create(world, keys):
    laptop, desktop, _theirs = keys
    _operation, cluster = create(world, ssh_key_ids=[desktop.pk, laptop.pk])
    assert chosen(cluster) == ["desktop", "laptop"]
    _operation, bare = create(world, name="bare")
    assert chosen(bare) == []


def test_another_projects_key_refuses_the_create_whole(world, keys):
    laptop, _desktop, theirs = keys
    with pytest.raises(SshKeyNotFound):
        create(world, ssh_key_ids=[laptop.pk, theirs.pk])
    with pytest.raises(SshKeyNotFound):
        create(world, ssh_key_ids=[laptop.pk, 10**9])
    assert not VirtualCluster.objects.exists()
    assert not Operation.objects.exists()
    refused = AuditEvent.objects.filter(action="cluster.create", outcome="REFUSED")
    assert {event.code for event in refused} == {"ssh_key_not_found"}


def test_the_keys_change_whole_and_a_refusal_keeps_the_set(world, keys):
    laptop, desktop, theirs = keys
    cluster = world.cluster()
    operation, _cluster = operations.cluster_ssh_keys_op(
        cluster.pk, actor=world.users["operator"], ssh_key_ids=[laptop.pk]
    )
    assert operation.kind == Operation.Kind.SSH_KEYS and operation.finished_at is not None
    assert chosen(cluster) == ["laptop"]
    operations.cluster_ssh_keys_op(cluster.pk, actor=world.admin, ssh_key_ids=[desktop.pk])
    assert chosen(cluster) == ["desktop"]
    with pytest.raises(SshKeyNotFound):
        operations.cluster_ssh_keys_op(
            cluster.pk, actor=world.admin, ssh_key_ids=[laptop.pk, theirs.pk]
        )
    assert chosen(cluster) == ["desktop"]
    with pytest.raises(PermissionRequired):
        operations.cluster_ssh_keys_op(cluster.pk, actor=world.users["viewer"], ssh_key_ids=[])
    assert chosen(cluster) == ["desktop"]
    operations.cluster_ssh_keys_op(cluster.pk, actor=world.admin, ssh_key_ids=[])
    assert chosen(cluster) == []
    outcomes = AuditEvent.objects.filter(action="cluster.ssh_keys", target_id=cluster.pk)
    assert sorted(outcomes.values_list("outcome", flat=True)) == [
        "REFUSED", "REFUSED", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED",
    ]  # fmt: skip
    assert outcomes.filter(outcome="SUCCEEDED", message="desktop").exists()


def test_any_cluster_but_a_deleted_one_changes_its_keys(world, keys):
    laptop, _desktop, _theirs = keys
    running = world.cluster("up", status=ClusterStatus.RUNNING)
    operations.cluster_ssh_keys_op(running.pk, actor=world.admin, ssh_key_ids=[laptop.pk])
    assert chosen(running) == ["laptop"]
    gone = world.cluster("gone", status=ClusterStatus.DELETED)
    with pytest.raises(InvalidTransition):
        operations.cluster_ssh_keys_op(gone.pk, actor=world.admin, ssh_key_ids=[laptop.pk])
    assert chosen(gone) == []


def test_a_key_deleted_from_the_registry_drops_out(world, keys):
    laptop, desktop, _theirs = keys
    _operation, cluster = create(world, ssh_key_ids=[laptop.pk, desktop.pk])
    ssh_keys.delete_ssh_key(desktop.pk, actor=world.admin)
    assert chosen(cluster) == ["laptop"]


def test_the_create_form_offers_the_projects_keys(world, keys, login):
    laptop, _desktop, theirs = keys
    client = login("admin")
    form = client.get(reverse("clusters:cluster_create")).content.decode()
    assert 'id="cluster-ssh-keys"' in form and ED25519_FINGERPRINT in form
    assert "theirs" not in form
    data = {
        "name": "train",
        "zone": world.zone_a.pk,
        "instance_type": world.h100.pk,
        "fabric_type": "INFINIBAND",
    }
    url = reverse("clusters:cluster_create")
    refused = client.post(url, {**data, "ssh_keys": [laptop.pk, theirs.pk]})
    assert refused.status_code == 422
    body = refused.content.decode()
    assert "SSH 키를 찾을 수 없습니다." in body
    assert f'id="cluster-ssh-keys-{laptop.pk}" value="{laptop.pk}" checked' in body
    assert not VirtualCluster.objects.exists()
    made = client.post(url, {**data, "ssh_keys": [laptop.pk]})
    assert made.status_code == 302
    assert chosen(VirtualCluster.objects.get()) == ["laptop"]


def test_the_info_tab_shows_the_keys_and_changes_them(world, keys, login):
    laptop, desktop, theirs = keys
    cluster = world.cluster()
    cluster.ssh_keys.set([laptop])
    viewer = login("viewer")
    page = viewer.get(reverse("clusters:cluster_detail", args=[cluster.pk])).content.decode()
    assert ED25519_FINGERPRINT in page and NOTE in page
    assert 'id="cluster-keys-change"' not in page  # a viewer may not change them
    admin = login("admin")
    page = admin.get(reverse("clusters:cluster_detail", args=[cluster.pk])).content.decode()
    assert 'id="cluster-keys-change"' in page
    assert f'id="cluster-keys-field-{laptop.pk}" value="{laptop.pk}" checked' in page
    url = reverse("clusters:cluster_ssh_keys", args=[cluster.pk])
    refused = admin.post(url, {"ssh_keys": [desktop.pk, theirs.pk]}, **HX)
    assert refused.status_code == 404
    assert "SSH 키를 찾을 수 없습니다." in refused.content.decode()
    assert chosen(cluster) == ["laptop"]
    done = admin.post(url, {"ssh_keys": [desktop.pk]}, **HX)
    assert done.status_code == 200 and "toast" in done.headers["HX-Trigger"]
    body = done.content.decode()
    listed = body.split('id="cluster-keys-chosen">')[1].split("</div></div>")[0]
    assert ED25519_OTHER_FINGERPRINT in listed and ED25519_FINGERPRINT not in listed
    assert chosen(cluster) == ["desktop"]
    plain = admin.post(url, {})
    assert plain.status_code == 302 and chosen(cluster) == []


def test_a_members_page_shows_the_keys_it_gets_from_its_cluster(world, keys, login):
    laptop, desktop, _theirs = keys
    cluster = world.cluster()
    member, _peer = world.members(cluster, 2)
    member.ssh_keys.set([laptop])
    cluster.ssh_keys.set([laptop, desktop])
    page = login("viewer").get(reverse("vms:vm_edit", args=[member.pk])).content.decode()
    own, from_cluster = page.split('id="vm-cluster-ssh-keys"')
    assert ED25519_FINGERPRINT in own.split('id="vm-ssh-keys"')[1]
    assert "클러스터의 키" in from_cluster and ED25519_OTHER_FINGERPRINT in from_cluster
    assert ED25519_FINGERPRINT not in from_cluster.split("</dd>")[0]  # its own, said once
