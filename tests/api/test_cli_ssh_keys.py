"""``vc ssh-key list|create|delete``, ``vc vm create --ssh-key`` and ``vc cluster create
--ssh-key`` over HTTP against the live
test server: a refused key exits 1 with the portal's message and saves nothing."""

import json

import pytest

import vc_cli.main as cli
from clusters.models import VirtualCluster
from portal.iam import ssh_keys, tokens
from portal.models import SshKey
from tests.ssh_keys_data import ED25519, ED25519_FINGERPRINT, ED25519_OTHER, RSA_1024
from vc_cli import http
from vms.models import VirtualMachine

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def vc(live_server, world, monkeypatch, capsys):
    _token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="cli")
    monkeypatch.setenv("VC_URL", live_server.url)
    monkeypatch.setenv("VC_TOKEN", secret)
    monkeypatch.setenv("VC_CONFIG", "/nonexistent")

    def run(*argv):
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_ssh_keys_through_the_cli(vc, world, tmp_path):
    good, bad = tmp_path / "id_ed25519.pub", tmp_path / "id_rsa.pub"
    good.write_text(ED25519 + "\n")
    bad.write_text(RSA_1024 + "\n")
    code, out, err = vc("-o", "json", "ssh-key", "create", "--name", "laptop", "--file", str(good))
    assert code == 0, err
    assert json.loads(out)["fingerprint"] == ED25519_FINGERPRINT
    code, out, err = vc("ssh-key", "create", "--name", "old", "--file", str(bad))
    assert code == http.EXIT_REFUSED and "1024" in err and "(public_key)" in err
    code, out, err = vc("ssh-key", "create", "--name", "x", "--file", str(tmp_path / "none"))
    assert code == http.EXIT_USAGE
    code, out, _err = vc("ssh-key", "list")
    assert code == 0 and "laptop" in out and ED25519_FINGERPRINT in out
    place = ("--zone", "kr-central-1a", "--instance-type", "gpu.h100x8")
    code, _out, err = vc("vm", "create", "node", *place, "--ssh-key", "laptop")
    assert code == 0, err
    assert [k.name for k in VirtualMachine.objects.get().ssh_keys.all()] == ["laptop"]
    code, _out, err = vc("vm", "create", "node2", *place, "--ssh-key", "nope")
    assert code == http.EXIT_NOT_FOUND
    code, _out, err = vc("ssh-key", "delete", "laptop")
    assert code == 0, err
    assert not SshKey.objects.exists()
    code, _out, _err = vc("ssh-key", "delete", "laptop")
    assert code == http.EXIT_NOT_FOUND


def test_cluster_create_with_keys_by_name_or_id(vc, world):
    laptop = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="laptop", public_key=ED25519
    )
    desktop = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="desktop", public_key=ED25519_OTHER
    )
    theirs = ssh_keys.create_ssh_key(
        actor=world.users["other"], project=world.other, name="theirs", public_key=ED25519
    )
    place = ("--zone", "kr-central-1a", "--instance-type", "gpu.h100x8", "--fabric", "INFINIBAND")
    code, _out, err = vc("cluster", "create", "c1", *place, "--ssh-key", str(theirs.pk))
    assert code == http.EXIT_NOT_FOUND and "SSH" in err
    code, _out, err = vc("cluster", "create", "c1", *place, "--ssh-key", "theirs")
    assert code == http.EXIT_NOT_FOUND
    assert not VirtualCluster.objects.exists()
    code, _out, err = vc(
        "cluster", "create", "c1", *place, "--ssh-key", "laptop", "--ssh-key", str(desktop.pk)
    )
    assert code == 0, err
    cluster = VirtualCluster.objects.get()
    assert sorted(cluster.ssh_keys.values_list("pk", flat=True)) == [laptop.pk, desktop.pk]
    code, out, err = vc("-o", "json", "cluster", "get", "c1")
    assert code == 0 and json.loads(out)["ssh_key_ids"] == [laptop.pk, desktop.pk]
