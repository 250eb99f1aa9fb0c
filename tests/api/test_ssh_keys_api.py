"""``/api/v1/ssh-keys`` and a VM create's ``ssh_key_ids`` (docs/rules.md#ssh-keys): the key
refused as problem+json with its code and nothing saved; another project's key a 404."""

import pytest

from portal.models import SshKey
from tests.ssh_keys_data import ED25519, ED25519_FINGERPRINT, ED25519_OTHER, RSA_1024
from vms.models import VirtualMachine

pytestmark = pytest.mark.django_db


def test_register_list_get_delete(api, secrets):
    token = secrets["admin"]
    made = api.post("/ssh-keys", {"name": "laptop", "public_key": ED25519 + "\n"}, token=token)
    assert made.status_code == 201, made.content
    key = made.json()
    assert key["fingerprint"] == ED25519_FINGERPRINT and key["public_key"] == ED25519
    assert (key["key_type"], key["bits"]) == ("ssh-ed25519", 256)
    listed = api.get("/ssh-keys", token=secrets["viewer"]).json()
    assert [k["name"] for k in listed["items"]] == ["laptop"]
    assert api.get(f"/ssh-keys/{key['id']}", token=secrets["viewer"]).json() == key
    assert api.get(f"/ssh-keys/{key['id']}", token=secrets["other"]).status_code == 404
    assert api.get("/ssh-keys", token=secrets["other"]).json()["items"] == []
    gone = api.delete(f"/ssh-keys/{key['id']}", token=token)
    assert gone.status_code == 204 and not SshKey.objects.exists()
    assert api.delete(f"/ssh-keys/{key['id']}", token=token).status_code == 404


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("ssh-ed25519 " + "A" * 100 * 1024, "ssh_key_too_large"),
        (ED25519 + '\ncommand="/bin/sh" ' + ED25519_OTHER, "ssh_key_line_break"),
        ('command="/bin/sh" ' + ED25519, "ssh_key_options"),
        ("ssh-ed25519 AAAA!!!!", "ssh_key_malformed"),
        (RSA_1024, "ssh_key_rsa_bits"),
    ],
)
def test_a_refused_key_is_a_problem_with_its_code(api, secrets, text, code):
    response = api.post("/ssh-keys", {"name": "k", "public_key": text}, token=secrets["admin"])
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == code and problem["field"] == "public_key"
    assert not SshKey.objects.exists()


def test_english_on_request(api, secrets):
    response = api.post(
        "/ssh-keys",
        {"name": "k", "public_key": ""},
        token=secrets["admin"],
        headers={"Accept-Language": "en"},
    )
    assert response.json()["code"] == "ssh_key_required"


def test_a_vm_carries_only_keys_of_its_project(api, secrets, world):
    mine = api.post("/ssh-keys", {"name": "mine", "public_key": ED25519}, token=secrets["admin"])
    theirs = api.post(
        "/ssh-keys", {"name": "theirs", "public_key": ED25519_OTHER}, token=secrets["other"]
    )
    body = {
        "name": "node",
        "zone_id": world.zone_a.pk,
        "instance_type_id": world.h100.pk,
        "billing_type": "ON_DEMAND",
    }
    refused = api.post(
        "/virtual-machines", {**body, "ssh_key_ids": [theirs.json()["id"]]}, token=secrets["admin"]
    )
    assert refused.status_code == 404 and refused.json()["code"] == "ssh_key_not_found"
    assert not VirtualMachine.objects.exists()
    made = api.post(
        "/virtual-machines", {**body, "ssh_key_ids": [mine.json()["id"]]}, token=secrets["admin"]
    )
    assert made.status_code == 202, made.content
    vm = VirtualMachine.objects.get()
    detail = api.get(f"/virtual-machines/{vm.pk}", token=secrets["viewer"]).json()
    assert detail["ssh_key_ids"] == [mine.json()["id"]]
