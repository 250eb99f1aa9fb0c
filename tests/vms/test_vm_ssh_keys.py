"""A VM carries the SSH keys of its own project chosen at create (docs/rules.md#ssh-keys):
another project's key is not found and no VM is made; the VM's page shows its keys."""

import pytest
from django.urls import reverse

from clusters import operations
from portal.foundation.errors.ssh_keys import SshKeyNotFound
from portal.iam import ssh_keys
from tests.ssh_keys_data import ED25519, ED25519_FINGERPRINT, ED25519_OTHER
from vms.models import VirtualMachine


@pytest.fixture
def keys(world):
    mine = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="laptop", public_key=ED25519
    )
    theirs = ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="theirs", public_key=ED25519_OTHER
    )
    return mine, theirs


def create(world, **extra):
    return operations.create_vms(
        actor=world.admin,
        project=world.demo,
        name="node",
        count=extra.pop("count", 1),
        zone_id=world.zone_a.pk,
        instance_type_id=world.h100.pk,
        billing_type="ON_DEMAND",
        **extra,
    )


def test_each_vm_created_carries_the_chosen_keys(world, keys):
    mine, _theirs = keys
    create(world, count=2, ssh_key_ids=[mine.pk])
    for vm in VirtualMachine.objects.all():
        assert list(vm.ssh_keys.all()) == [mine]


def test_a_key_of_another_project_refuses_the_create_whole(world, keys):
    mine, theirs = keys
    with pytest.raises(SshKeyNotFound):
        create(world, count=2, ssh_key_ids=[mine.pk, theirs.pk])
    assert not VirtualMachine.objects.exists()


def test_the_create_form_offers_the_projects_keys_and_the_page_shows_them(world, keys, client):
    mine, theirs = keys
    client.force_login(world.admin)
    form = client.get(reverse("vms:vm_create")).content.decode()
    assert ED25519_FINGERPRINT in form and "theirs" not in form
    data = {
        "name": "node",
        "zone": world.zone_a.pk,
        "instance_type": world.h100.pk,
        "billing_type": "ON_DEMAND",
        "count": 1,
    }
    refused = client.post(reverse("vms:vm_create"), {**data, "ssh_keys": [theirs.pk]})
    assert refused.status_code == 422 and "SSH 키를 찾을 수 없습니다." in refused.content.decode()
    assert not VirtualMachine.objects.exists()
    made = client.post(reverse("vms:vm_create"), {**data, "ssh_keys": [mine.pk]})
    assert made.status_code == 302
    vm = VirtualMachine.objects.get()
    assert list(vm.ssh_keys.all()) == [mine]
    page = client.get(reverse("vms:vm_edit", args=[vm.pk])).content.decode()
    assert "laptop" in page and ED25519_FINGERPRINT in page
