"""A project's SSH keys (docs/rules.md#ssh-keys): each refusal of a key's text, with nothing
saved and the attempt audited; the fingerprint as ssh-keygen prints it; the SSH 키 page."""

import base64

import pytest
from django.urls import reverse

from portal.foundation.errors import NameInvalid, PermissionRequired
from portal.foundation.errors import ssh_keys as errors
from portal.iam import ssh_keys
from portal.models import AuditEvent, SshKey
from tests.ssh_keys_data import (
    ECDSA,
    ED25519,
    ED25519_FINGERPRINT,
    ED25519_OTHER,
    RSA_1024,
    RSA_2048,
    RSA_2048_FINGERPRINT,
    line,
    mpint,
    rsa_key,
    string,
)

ED_BLOB = base64.b64decode(ED25519.split()[1])
REFUSED = {
    "empty": ("  \n", errors.SshKeyRequired),
    "100 KB": ("ssh-ed25519 " + "A" * 100 * 1024, errors.SshKeyTooLarge),
    "just over 16 KB": (ED25519 + " " + "c" * (16 * 1024), errors.SshKeyTooLarge),
    "newline-injected option": (
        ED25519 + '\ncommand="/bin/sh" ' + ED25519_OTHER,
        errors.SshKeyLineBreak,
    ),
    "carriage return": (ED25519 + "\rx", errors.SshKeyLineBreak),
    "escape in the comment": (ED25519 + "\x1b[2J", errors.SshKeyLineBreak),
    "two key lines": (ED25519 + "\n" + ED25519_OTHER, errors.SshKeyMany),
    "two keys on a line": (ED25519 + " " + ED25519_OTHER, errors.SshKeyMany),
    "command= option": ('command="/bin/sh" ' + ED25519, errors.SshKeyOptions),
    "options with spaces": ('no-pty,from="10.0.0.1" ' + ED25519, errors.SshKeyOptions),
    "ecdsa": (ECDSA, errors.SshKeyTypeUnsupported),
    "dsa": ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", errors.SshKeyTypeUnsupported),
    "not a key": ("hello world", errors.SshKeyMalformed),
    "type alone": ("ssh-ed25519", errors.SshKeyMalformed),
    "bad base64": ("ssh-ed25519 AAAA!!!!", errors.SshKeyMalformed),
    "base64 padding wrong": ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5A", errors.SshKeyMalformed),
    "blob cut short": (line(ED_BLOB[:-4]), errors.SshKeyMalformed),
    "bytes after the key": (line(ED_BLOB + b"\0"), errors.SshKeyMalformed),
    "ed25519 of 31 bytes": (
        line(string(b"ssh-ed25519") + string(b"k" * 31)),
        errors.SshKeyMalformed,
    ),
    "length past the blob": (line(b"\xff\xff\xff\xff"), errors.SshKeyMalformed),
    "type mismatch": ("ssh-rsa " + ED25519.split()[1], errors.SshKeyTypeMismatch),
    "negative modulus": (
        line(string(b"ssh-rsa") + mpint(65537) + string(b"\x80" + b"\0" * 300), "ssh-rsa"),
        errors.SshKeyMalformed,
    ),
    "even exponent": (rsa_key(2048, exponent=65536), errors.SshKeyMalformed),
    "rsa 1024": (RSA_1024, errors.SshKeyRsaBits),
    "rsa 2047": (rsa_key(2047), errors.SshKeyRsaBits),
    "rsa 16385": (rsa_key(16385), errors.SshKeyRsaBits),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_each_refusal_of_a_key_is_typed_saves_nothing_and_is_audited(world, case):
    text, refusal = REFUSED[case]
    assert type(ssh_keys.public_key_refusal(text)) is refusal
    with pytest.raises(refusal) as raised:
        ssh_keys.create_ssh_key(actor=world.admin, project=world.demo, name="k", public_key=text)
    assert raised.value.status == 422 and raised.value.field == "public_key"
    assert not SshKey.objects.exists()
    event = AuditEvent.objects.get(action="ssh_key.create")
    assert event.outcome == AuditEvent.Outcome.REFUSED and event.code == refusal.code


def test_the_refusals_say_what_is_accepted():
    assert "16384" in ssh_keys.public_key_refusal("x" * 20000).message
    unsupported = ssh_keys.public_key_refusal(ECDSA).message
    assert "ecdsa-sha2-nistp256" in unsupported
    assert "ssh-ed25519" in unsupported and "ssh-rsa" in unsupported
    assert "1024" in ssh_keys.public_key_refusal(RSA_1024).message


@pytest.mark.parametrize(
    ("text", "key_type", "bits", "fingerprint", "normalised"),
    [
        (ED25519, "ssh-ed25519", 256, ED25519_FINGERPRINT, ED25519),
        (RSA_2048 + "\n", "ssh-rsa", 2048, RSA_2048_FINGERPRINT, RSA_2048),
        ("  " + ED25519.replace(" ", "\t", 1) + "  \n", "ssh-ed25519", 256, None, ED25519),
        (ED25519.replace("me@laptop", "a  b"), "ssh-ed25519", 256, None, None),
    ],
)
def test_a_key_is_kept_normalised_with_ssh_keygens_fingerprint(
    world, text, key_type, bits, fingerprint, normalised
):
    key = ssh_keys.create_ssh_key(actor=world.admin, project=world.demo, name="k", public_key=text)
    key.refresh_from_db()
    assert (key.key_type, key.bits) == (key_type, bits)
    assert key.fingerprint == (fingerprint or ED25519_FINGERPRINT)
    assert key.public_key == (normalised or ED25519.replace("me@laptop", "a b"))
    assert key.created_by == world.admin
    event = AuditEvent.objects.get(action="ssh_key.create")
    assert event.outcome == AuditEvent.Outcome.SUCCEEDED and event.project_id == world.demo.pk


def test_a_name_or_a_key_once_per_project(world):
    create = ssh_keys.create_ssh_key
    create(actor=world.admin, project=world.demo, name="laptop", public_key=ED25519)
    with pytest.raises(errors.SshKeyNameTaken):
        create(actor=world.admin, project=world.demo, name="laptop", public_key=ED25519_OTHER)
    with pytest.raises(errors.SshKeyDuplicate) as same:
        create(actor=world.admin, project=world.demo, name="again", public_key=ED25519)
    assert "laptop" in same.value.message
    with pytest.raises(NameInvalid):
        create(actor=world.admin, project=world.demo, name="bad name!", public_key=ED25519_OTHER)
    # Another project registers the same key under the same name: its own.
    create(actor=world.users["other"], project=world.other, name="laptop", public_key=ED25519)
    assert SshKey.objects.count() == 2


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_only_a_role_with_create_registers_and_with_delete_deletes(world, role):
    user = world.users[role]
    with pytest.raises(PermissionRequired):
        ssh_keys.create_ssh_key(actor=user, project=world.demo, name="k", public_key=ED25519)
    key = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="k", public_key=ED25519
    )
    with pytest.raises(PermissionRequired):
        ssh_keys.delete_ssh_key(key.pk, actor=user)
    with pytest.raises(errors.SshKeyNotFound):
        ssh_keys.delete_ssh_key(key.pk, actor=world.users["other"])
    assert SshKey.objects.filter(pk=key.pk).exists()
    ssh_keys.delete_ssh_key(key.pk, actor=world.admin)
    assert not SshKey.objects.exists()


def test_chosen_keys_are_the_projects_own(world):
    mine = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="k", public_key=ED25519
    )
    theirs = ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="k", public_key=ED25519_OTHER
    )
    assert ssh_keys.chosen_keys(world.admin, world.demo, [mine.pk, str(mine.pk)]) == [mine]
    for ids in ([theirs.pk], [mine.pk, theirs.pk], ["x"], [True], [0]):
        with pytest.raises(errors.SshKeyNotFound):
            ssh_keys.chosen_keys(world.admin, world.demo, ids)
    with pytest.raises(errors.SshKeyNotFound):  # the right key, the wrong project
        ssh_keys.chosen_keys(world.users["other"], world.other, [mine.pk])


# ---------------------------------------------------------------------------------------------
# The SSH 키 page


def test_the_page_lists_the_current_projects_keys_and_registers_one(world, client):
    ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="theirs", public_key=ED25519_OTHER
    )
    client.force_login(world.admin)
    page = client.get(reverse("ssh_keys"))
    assert page.status_code == 200 and "theirs" not in page.content.decode()
    assert "SSH 키" in page.content.decode()
    added = client.post(reverse("ssh_keys"), {"name": "laptop", "public_key": ED25519 + "\n"})
    body = added.content.decode()
    assert added.status_code == 200 and ED25519_FINGERPRINT in body and "laptop" in body
    assert SshKey.objects.get(name="laptop").project == world.demo


def test_the_page_refuses_a_bad_key_in_place_and_keeps_what_was_typed(world, client):
    client.force_login(world.admin)
    refused = client.post(reverse("ssh_keys"), {"name": "laptop", "public_key": RSA_1024})
    body = refused.content.decode()
    assert refused.status_code == 422
    assert "RSA 키는 2048~16384비트여야 합니다(이 키는 1024비트)." in body
    assert 'aria-invalid="true"' in body and "root@vm" in body
    nul = client.post(reverse("ssh_keys"), {"name": "x", "public_key": ED25519 + "\0"})
    assert nul.status_code == 400 and "NUL" in nul.content.decode()
    assert not SshKey.objects.exists()


def test_a_viewer_sees_the_keys_without_the_form_or_delete(world, client):
    ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="laptop", public_key=ED25519
    )
    client.force_login(world.users["viewer"])
    body = client.get(reverse("ssh_keys")).content.decode()
    assert "laptop" in body and ED25519_FINGERPRINT in body
    assert 'name="public_key"' not in body and "ssh-keys/" not in body.split("<tbody>")[1]


def test_delete_from_the_page(world, client):
    key = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="laptop", public_key=ED25519
    )
    client.force_login(world.admin)
    response = client.post(reverse("ssh_key_delete", args=[key.pk]))
    assert response.status_code == 302 and not SshKey.objects.exists()
