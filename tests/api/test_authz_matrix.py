"""The API's authorization matrix: every route of the OpenAPI document × every actor
(anonymous, bad token, revoked token, another project's admin, viewer, operator, admin).

Routes come from the document, so a route added without an entry here fails. A refusal
(401, 403, 404) leaves clusters and VMs exactly as they were; a 403 names the permission.
"""

from dataclasses import dataclass

import pytest

from clusters.models import ClusterSpare, ClusterStatus, Operation
from clusters.operations import attach_many
from portal.iam import ssh_keys, tokens
from portal.iam.permissions import Perm
from portal.models import ApiToken, SshKey
from portal.webhooks import services as webhook_services
from portal.webhooks.models import Webhook, WebhookDelivery
from tests.api.conftest import openapi_document
from tests.ssh_keys_data import ED25519, ED25519_OTHER
from vms.models import VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db
ACTORS = ("anonymous", "bad", "revoked", "other", "viewer", "operator", "admin")


@dataclass(frozen=True)
class Scene:
    cluster: object  # 미할당, two stopped members: may start, be deleted
    running: object  # 실행중, two stopped members: may stop
    member: object  # a stopped member of ``cluster``
    loose: object  # a stopped VM of no cluster
    running_vm: object
    operation: object
    busy: object  # 실행중, two running members: may be validated
    key: object  # an SSH key of demo
    hook: object  # a webhook of demo
    spare: object  # a stopped VM ``cluster`` keeps as a 예비


@pytest.fixture
def scene(world):
    cluster = world.cluster("matrix")
    member, _second = world.members(cluster, 2)
    running = world.cluster("matrix-run", status=ClusterStatus.RUNNING)
    world.members(running, 2)
    loose = world.vm("loose")
    running_vm = world.vm("busy", status=VmStatus.RUNNING)
    operation = attach_many(cluster.pk, [loose.pk], actor=None)
    loose.refresh_from_db()
    loose.cluster = None
    loose.save()
    busy = world.cluster("matrix-busy", status=ClusterStatus.RUNNING)
    world.members(busy, 2, status=VmStatus.RUNNING)
    key = ssh_keys.create_ssh_key(
        actor=world.admin, project=world.demo, name="matrix", public_key=ED25519
    )
    hook = webhook_services.create_webhook(
        actor=world.admin, project=world.demo, name="matrix", url="https://hooks.example.com/m"
    )
    spare = world.vm("kept")
    ClusterSpare.objects.create(cluster=cluster, vm=spare)
    return Scene(cluster, running, member, loose, running_vm, operation, busy, key, hook, spare)


def seen():
    """Who may read the project: its three roles; ``other`` is outside (404)."""
    return {"other": 404, "viewer": 200, "operator": 200, "admin": 200}


def listing():
    return {"other": 200, "viewer": 200, "operator": 200, "admin": 200}


def change(perm, operator_may, code=202, other=404):
    return {
        "other": other,
        "viewer": (403, perm),
        "operator": code if operator_may else (403, perm),
        "admin": code,
    }


MATRIX = {
    ("get", "/zones"): [("", None, listing())],
    ("get", "/instance-types"): [("", None, listing())],
    ("get", "/virtual-clusters"): [("", None, listing())],
    ("post", "/virtual-clusters"): [
        ("", "cluster_body", change(Perm.CLUSTER_CREATE, False, other=202)),
        # With demo's key: another project's admin may create, but not with that key (404).
        ("", "cluster_keys_body", change(Perm.CLUSTER_CREATE, False)),
    ],
    ("get", "/virtual-clusters/{cluster_id}"): [("cluster", None, seen())],
    ("delete", "/virtual-clusters/{cluster_id}"): [
        ("cluster", None, change(Perm.CLUSTER_DELETE, False))
    ],
    ("get", "/virtual-clusters/{cluster_id}/members"): [("cluster", None, seen())],
    ("post", "/virtual-clusters/{cluster_id}/members"): [
        ("cluster", "attach_body", change(Perm.VM_UPDATE, True))
    ],
    ("get", "/virtual-clusters/{cluster_id}/hostfile"): [("cluster", None, seen())],
    ("get", "/virtual-clusters/{cluster_id}/metrics"): [("cluster", None, seen())],
    ("get", "/virtual-clusters/{cluster_id}/straggler"): [("cluster", None, seen())],
    ("get", "/virtual-clusters/{cluster_id}/launch"): [("cluster", None, seen())],
    ("patch", "/virtual-clusters/{cluster_id}"): [
        ("cluster", {"name": "renamed"}, change(Perm.CLUSTER_UPDATE, True, code=200)),
        ("cluster", "keys_body", change(Perm.CLUSTER_UPDATE, True, code=200)),
    ],
    ("post", "/virtual-clusters/{cluster_id}:start"): [
        ("cluster", {}, change(Perm.CLUSTER_UPDATE, True))
    ],
    ("post", "/virtual-clusters/{cluster_id}:stop"): [
        ("running", {}, change(Perm.CLUSTER_UPDATE, True))
    ],
    ("delete", "/virtual-clusters/{cluster_id}/members/{vm_id}"): [
        ("member", None, change(Perm.VM_UPDATE, True))
    ],
    ("post", "/virtual-clusters/{cluster_id}:validate"): [
        ("busy", {"level": 1}, change(Perm.CLUSTER_UPDATE, True))
    ],
    ("get", "/virtual-clusters/{cluster_id}/validations"): [("busy", None, seen())],
    ("post", "/virtual-clusters/{cluster_id}/members/{vm_id}:replace"): [
        ("member", "replace_body", change(Perm.VM_UPDATE, True))
    ],
    ("get", "/virtual-clusters/{cluster_id}/spares"): [("cluster", None, seen())],
    ("post", "/virtual-clusters/{cluster_id}/spares"): [
        ("cluster", "spare_body", change(Perm.CLUSTER_UPDATE, True))
    ],
    ("delete", "/virtual-clusters/{cluster_id}/spares/{vm_id}"): [
        ("spare", None, change(Perm.CLUSTER_UPDATE, True))
    ],
    ("get", "/virtual-clusters/{cluster_id}/policy"): [("cluster", None, seen())],
    ("put", "/virtual-clusters/{cluster_id}/policy"): [
        ("cluster", {"policy": "auto"}, change(Perm.CLUSTER_UPDATE, True))
    ],
    ("get", "/virtual-machines"): [("", None, listing())],
    ("post", "/virtual-machines"): [("", "vm_body", change(Perm.VM_CREATE, False, other=202))],
    ("get", "/virtual-machines/{vm_id}"): [("loose", None, seen())],
    ("patch", "/virtual-machines/{vm_id}"): [
        ("loose", {"name": "renamed"}, change(Perm.VM_UPDATE, True, code=200))
    ],
    ("delete", "/virtual-machines/{vm_id}"): [("loose", None, change(Perm.VM_DELETE, False))],
    ("post", "/virtual-machines/{vm_id}:start"): [("loose", {}, change(Perm.VM_UPDATE, True))],
    ("post", "/virtual-machines/{vm_id}:stop"): [("running_vm", {}, change(Perm.VM_UPDATE, True))],
    ("get", "/ssh-keys"): [("", None, listing())],
    ("post", "/ssh-keys"): [("", "ssh_key_body", change(Perm.SSH_KEY_CREATE, False, 201, 201))],
    ("get", "/ssh-keys/{key_id}"): [("key", None, seen())],
    ("delete", "/ssh-keys/{key_id}"): [("key", None, change(Perm.SSH_KEY_DELETE, False, 204))],
    ("get", "/webhooks"): [("", None, listing())],
    ("post", "/webhooks"): [("", "webhook_body", change(Perm.WEBHOOK_CREATE, False, 201, 201))],
    ("get", "/webhooks/{webhook_id}"): [("hook", None, seen())],
    ("delete", "/webhooks/{webhook_id}"): [("hook", None, change(Perm.WEBHOOK_DELETE, False, 204))],
    ("post", "/webhooks/{webhook_id}:test"): [("hook", {}, change(Perm.WEBHOOK_UPDATE, True))],
    ("get", "/webhooks/{webhook_id}/deliveries"): [("hook", None, seen())],
    ("get", "/operations"): [("", None, listing())],
    ("get", "/operations/{operation_id}"): [("operation", None, seen())],
    # The scene's operation is a finished attach: every reader who may cancel is told no.
    ("post", "/operations/{operation_id}:cancel"): [
        ("operation", {}, change(Perm.CLUSTER_UPDATE, True, code=409))
    ],
}


def documented_routes():
    prefix = "/api/v1"
    return sorted(
        (method, path.removeprefix(prefix))
        for path, item in openapi_document()["paths"].items()
        for method in item
    )


def test_every_documented_route_has_an_entry_and_no_entry_is_stale():
    assert sorted(MATRIX) == documented_routes()


def body_of(name, scene, world):
    bodies = {
        "cluster_body": {
            "name": "made-by-api", "zone_id": world.zone_a.pk, "instance_type_id": world.h100.pk,
            "fabric_type": "INFINIBAND",
        },
        "vm_body": {
            "name": "vm-by-api", "zone_id": world.zone_a.pk, "instance_type_id": world.h100.pk,
            "billing_type": "ON_DEMAND",
        },
        "cluster_keys_body": {
            "name": "keyed-by-api", "zone_id": world.zone_a.pk, "instance_type_id": world.h100.pk,
            "fabric_type": "INFINIBAND", "ssh_key_ids": [scene.key.pk],
        },
        "keys_body": {"ssh_key_ids": [scene.key.pk]},
        "attach_body": {"vm_ids": [scene.loose.pk]},
        "replace_body": {"spare_vm_id": scene.loose.pk},
        "spare_body": {"vm_id": scene.loose.pk},
        "ssh_key_body": {"name": "by-api", "public_key": ED25519_OTHER},
        "webhook_body": {"name": "by-api", "url": "https://hooks.example.com/api"},
    }  # fmt: skip
    return bodies[name] if isinstance(name, str) else name


def url_of(path, target, scene):
    if not target:
        return path
    obj = getattr(scene, target)
    if target == "member":
        return path.format(cluster_id=obj.cluster_id, vm_id=obj.pk)
    if target == "spare":
        return path.format(cluster_id=obj.spare_of.cluster_id, vm_id=obj.pk)
    return path.format(
        cluster_id=obj.pk, vm_id=obj.pk, operation_id=obj.pk, key_id=obj.pk, webhook_id=obj.pk
    )


def snapshot():
    from clusters.models import VirtualCluster

    return (
        sorted(
            VirtualCluster.objects.values_list(
                "pk", "name", "status", "project_id", "policy_row__policy"
            )
        ),
        sorted(ClusterSpare.objects.values_list("cluster_id", "vm_id")),
        sorted(VirtualMachine.objects.values_list("pk", "name", "status", "cluster_id")),
        sorted(SshKey.objects.values_list("pk", "name", "project_id")),
        sorted(Webhook.objects.values_list("pk", "name", "url", "project_id")),
        WebhookDelivery.objects.count(),
        sorted(
            VirtualCluster.ssh_keys.through.objects.values_list("virtualcluster_id", "sshkey_id")
        ),
    )


def token_of(actor, secrets, world):
    if actor == "anonymous":
        return None
    if actor == "bad":
        return "vcp_" + "0" * 43
    if actor == "revoked":
        token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="r")
        ApiToken.objects.filter(pk=token.pk).update(revoked_at=token.created_at)
        return secret
    return secrets[actor]


def _cases():
    for (method, path), cases in sorted(MATRIX.items()):
        for index in range(len(cases)):
            for actor in ACTORS:
                name = f"{method} {path} #{index} {actor}"
                yield pytest.param(method, path, index, actor, id=name)


@pytest.mark.parametrize(("method", "path", "index", "actor"), list(_cases()))
def test_api_authorization_matrix(method, path, index, actor, api, world, secrets, scene):
    target, body, expected = MATRIX[(method, path)][index]
    expect = 401 if actor in ("anonymous", "bad", "revoked") else expected[actor]
    status, perm = expect if isinstance(expect, tuple) else (expect, None)
    before, operations = snapshot(), Operation.objects.count()
    kwargs = {"token": token_of(actor, secrets, world)}
    if body is not None:
        kwargs["json_body"] = body_of(body, scene, world)

    response = api.request(method.upper(), url_of(path, target, scene), **kwargs)

    assert response.status_code == status, response.content[:500]
    if status == 403:
        assert response.json()["permission"] == str(perm)
        assert response.json()["detail"] == f"{perm} 권한이 필요합니다."
    if status in (401, 403, 404):
        assert snapshot() == before, "a refused request changed the database"
        assert Operation.objects.count() == operations
