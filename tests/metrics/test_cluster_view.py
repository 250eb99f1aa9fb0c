"""What a member's agent learns of its cluster (``GET /api/metrics/cluster``): its rank, its
peers, rank 0's address, the cluster's key pair — only its own cluster's, the private key only
while the cluster runs; a new pair at every start; a version that a 교체 changes. And the
guest's host keys (``POST /api/metrics/host-keys``), fingerprinted by the portal."""

import base64
import hashlib
import shutil
import subprocess

import orjson
import pytest
from django.core.cache import cache
from django.urls import reverse
from openapi_schema_validator import OAS31Validator

from clusters import cluster_key, operations, services
from clusters.models import ClusterKey, ClusterStatus
from metrics import openapi
from metrics import services as metrics_services
from metrics.vm_agent import hostkeys
from vms.models import BillingType, HostKey, VirtualMachine, VmStatus

ED25519 = (
    "ssh-ed25519 "
    + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32))).decode()
)


@pytest.fixture(autouse=True)
def fresh_rate_windows():
    cache.clear()


def documented(path, method, response):
    """The answer's status (and body, if any) as the agents' OpenAPI document says."""
    document = openapi.document()
    answers = document["paths"][path][method]["responses"]
    assert str(response.status_code) in answers, response.status_code
    content = answers[str(response.status_code)].get("content")
    if content:
        schema = content[response["Content-Type"].split(";")[0]]["schema"]
        OAS31Validator({**schema, "components": document["components"]}).validate(
            orjson.loads(response.content)
        )


def view(client, token, **headers):
    response = client.get(
        reverse("metrics:ingest_cluster"), headers={"Authorization": f"Bearer {token}", **headers}
    )
    documented("/api/metrics/cluster", "get", response)
    return response


def report(client, token, body):
    response = client.generic(
        "POST",
        reverse("metrics:ingest_host_keys"),
        orjson.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    documented("/api/metrics/host-keys", "post", response)
    return response


def token_of(vm):
    return metrics_services.rotate_token(vm.pk, actor=None)[1]


@pytest.fixture
def running(world, django_capture_on_commit_callbacks):
    """A 실행중 RoCE cluster of three running members started by the service (so with its
    key), and their tokens."""
    world.capacity(8, fabric="ROCE_V2")
    cluster = world.cluster("ring", fabric_type="ROCE_V2")
    vms = [world.vm(name, private_ip=f"10.0.0.{i + 5}") for i, name in enumerate("abc")]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    with django_capture_on_commit_callbacks(execute=True):  # the walk to 실행중
        services.start_cluster(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    cluster.members.update(status=VmStatus.RUNNING)
    return cluster, {vm.name: token_of(vm) for vm in vms}


def test_a_member_gets_its_rank_its_peers_and_the_clusters_key(client, running):
    cluster, tokens = running
    response = view(client, tokens["b"])
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    body = response.json()
    members = {m["name"]: m for m in body["members"]}
    fabric = dict(cluster.members.values_list("name", "fabric_ip"))
    assert body["rank"] == 1 and body["nnodes"] == 3
    assert [m["rank"] for m in body["members"]] == [0, 1, 2]
    assert {name: m["address"] for name, m in members.items()} == fabric
    assert all(fabric.values())  # RoCE: every address is on the fabric
    assert body["master_addr"] == fabric["a"] and body["nproc_per_node"] == 8
    assert {m["slots"] for m in body["members"]} == {8}
    assert members["c"]["hostname"] == "c" and members["c"]["private_ip"] == "10.0.0.7"
    key = ClusterKey.objects.get(cluster=cluster)
    assert body["ssh"]["public_key"] == key.public_key
    assert body["ssh"]["private_key"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert response["ETag"] == f'"{body["version"]}"'


def test_the_private_key_is_sealed_at_rest(running):
    cluster, _tokens = running
    key = ClusterKey.objects.get(cluster=cluster)
    assert "PRIVATE KEY" not in key.sealed_private_key
    assert cluster_key.unseal(key.sealed_private_key).startswith("-----BEGIN OPENSSH")
    assert key.public_key.startswith("ssh-ed25519 ")
    assert key.public_key.endswith(f" vc-cluster-{cluster.pk}")


def test_an_unchanged_view_is_answered_304_without_a_body(client, running):
    _cluster, tokens = running
    first = view(client, tokens["a"])
    again = view(client, tokens["a"], **{"If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again.content == b""
    assert again["ETag"] == first["ETag"]


def test_a_vm_in_no_cluster_gets_nothing_of_any_cluster(client, world, running):
    outsider = world.vm("outside", status=VmStatus.RUNNING)
    response = view(client, token_of(outsider))
    assert response.status_code == 404 and response.json()["code"] == "no_cluster"
    assert b"PRIVATE" not in response.content and b"ring" not in response.content


def test_another_projects_member_never_sees_this_cluster(client, world, running):
    cluster, _tokens = running
    world.capacity(8, fabric="ROCE_V2")
    theirs = world.cluster("theirs", project=world.other, fabric_type="ROCE_V2")
    vm = world.members(theirs, 1, status=VmStatus.RUNNING)[0]
    body = view(client, token_of(vm)).json()
    assert body["cluster"]["id"] == theirs.pk
    assert {m["id"] for m in body["members"]} == {vm.pk}
    assert body["ssh"]["private_key"] is None  # theirs never started: no key
    mine = ClusterKey.objects.get(cluster=cluster).public_key
    assert mine not in str(body)


@pytest.mark.parametrize("token", [None, "vcm_" + "x" * 40])
def test_no_token_or_a_made_up_one_is_401(client, db, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.get(reverse("metrics:ingest_cluster"), headers=headers)
    assert response.status_code == 401 and response.json()["code"] == "unauthorized"


def test_the_private_key_goes_only_to_a_running_clusters_starting_or_running_members(
    client, running
):
    cluster, tokens = running
    VirtualMachine.objects.filter(name="c").update(status=VmStatus.STOPPED)
    stopped = view(client, tokens["c"]).json()
    assert stopped["ssh"] == {"user": "vc", "public_key": None, "private_key": None}
    VirtualMachine.objects.filter(name="c").update(status=VmStatus.STARTING)
    assert view(client, tokens["c"]).json()["ssh"]["private_key"]
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.TERMINATED)
    body = view(client, tokens["a"]).json()
    assert body["ssh"]["private_key"] is None and body["ssh"]["public_key"] is None
    assert body["rank"] == 0  # the rest is still told


def test_every_start_makes_a_new_key_pair(world, running):
    cluster, _tokens = running
    first = ClusterKey.objects.get(cluster=cluster)
    cluster.members.update(status=VmStatus.STOPPED)
    services.stop_cluster(cluster.pk, actor=world.admin)
    services.start_cluster(cluster.pk, actor=world.admin)
    second = ClusterKey.objects.get(cluster=cluster)
    assert second.public_key != first.public_key
    assert second.sealed_private_key != first.sealed_private_key
    assert second.generation == first.generation + 1


def test_a_replace_gives_the_spare_the_old_rank_and_changes_the_version(
    client, world, running, django_capture_on_commit_callbacks
):
    cluster, tokens = running
    before = view(client, tokens["a"]).json()
    b = VirtualMachine.objects.get(name="b")
    spare = world.vm("spare", billing_type=BillingType.RESERVED)
    with django_capture_on_commit_callbacks(execute=True):  # stop b, swap, start the spare
        operation = operations.replace_member(cluster.pk, b.pk, spare.pk, actor=world.admin)
    operation.refresh_from_db()
    assert operation.done and operation.last_error is None
    after = view(client, tokens["a"], **{"If-None-Match": f'"{before["version"]}"'})
    assert after.status_code == 200
    body = after.json()
    assert body["version"] != before["version"]
    assert [(m["name"], m["rank"]) for m in body["members"]] == [
        ("a", 0),
        ("spare", 1),
        ("c", 2),
    ]
    assert view(client, tokens["b"]).status_code == 404  # the replaced member: no cluster


def test_host_keys_are_fingerprinted_by_the_portal_and_told_to_peers(client, running):
    _cluster, tokens = running
    answer = report(client, tokens["b"], {"host_keys": [ED25519 + " root@b"]})
    assert answer.status_code == 200 and answer.json() == {"changed": True}
    assert report(client, tokens["b"], {"host_keys": [ED25519]}).json() == {"changed": False}
    blob = base64.b64decode(ED25519.split()[1])
    expected = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    row = HostKey.objects.get(vm__name="b")
    assert (row.key_type, row.public_key, row.fingerprint) == ("ssh-ed25519", ED25519, expected)
    peer = next(m for m in view(client, tokens["a"]).json()["members"] if m["name"] == "b")
    assert peer["host_keys"] == [{"key": ED25519, "fingerprint": expected}]


@pytest.mark.parametrize(
    "body",
    [
        {"host_keys": ["ssh-dss AAAAB3NzaC1kc3M="]},
        {"host_keys": ["ssh-ed25519 !!!"]},
        {"host_keys": ["ssh-rsa " + ED25519.split()[1]]},  # the blob says ed25519
        {"host_keys": [ED25519, ED25519]},
        {"host_keys": "ssh-ed25519"},
        {"keys": []},
    ],
)
def test_a_report_that_is_not_host_keys_is_refused_whole(client, running, body):
    _cluster, tokens = running
    response = report(client, tokens["a"], body)
    assert response.status_code == 400 and response.json()["code"] == "invalid"
    assert not HostKey.objects.exists()


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen here")
def test_fingerprints_are_those_ssh_keygen_prints(tmp_path):
    for kind in ("ed25519", "ecdsa", "rsa"):
        path = tmp_path / f"ssh_host_{kind}_key"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
        printed = subprocess.run(
            ["ssh-keygen", "-lf", f"{path}.pub"], capture_output=True, text=True, check=True
        ).stdout.split()[1]
        assert hostkeys.parse(path.with_suffix(".pub").read_text())["fingerprint"] == printed
    assert [key["type"] for key in hostkeys.read(str(tmp_path))] == [
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
        "ssh-rsa",
    ]
