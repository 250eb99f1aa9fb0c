"""The authorization matrix (docs/rules.md#permissions): every URL of the portal ×
anonymous / no role / viewer / operator / admin / another project's admin.

URLs are discovered from the URLconf, so a URL added without an entry in ``MATRIX`` shows up
here as a failing case. Each case states what every role must get: a login redirect, a 404
(the object is invisible), a 403 whose page names the missing permission, or success — and
a refused request must leave the database as it was, with the refusal audited.
"""

from dataclasses import dataclass, field, replace

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from clusters.models import ClusterSpare, ClusterStatus, VirtualCluster
from portal.iam.permissions import Perm
from portal.models import AuditEvent, SshKey
from portal.webhooks.models import Webhook, WebhookDelivery
from tests.conftest import PASSWORD
from tests.ssh_keys_data import ED25519_OTHER
from vms.models import VirtualMachine, VmStatus

ROLES = ("anonymous", "norole", "viewer", "operator", "admin", "other")
# The API (bearer tokens, problem+json) has its own matrix: tests/api/test_authz_matrix.py.
SKIPPED_PREFIXES = ("admin/", "api/v1/", settings.STATIC_URL.lstrip("/"))


def discover_urls():
    """{name: route} of every pattern, namespaces included, admin and static left out."""
    found = {}

    def walk(resolver, prefix, namespaces):
        for entry in resolver.url_patterns:
            route = prefix + str(entry.pattern)
            if route.startswith(SKIPPED_PREFIXES):
                continue
            if isinstance(entry, URLResolver):
                walk(entry, route, namespaces + ((entry.namespace,) if entry.namespace else ()))
            elif isinstance(entry, URLPattern):
                name = ":".join(namespaces + (entry.name,)) if entry.name else f"<unnamed {route}>"
                found[name] = route

    walk(get_resolver(), "", ())
    return found


# ---------------------------------------------------------------------------------------------
# What a role may get


@dataclass(frozen=True)
class Expect:
    status: object  # "login", "ok", or an HTTP status
    perm: str = ""  # for 403: the permission the page must name
    contains: tuple = ()  # attribute names of the scene whose .name must be on the page
    absent: tuple = ()
    text: str = ""  # literal text the page must show
    bug: str = ""  # a reported bug: the case is xfail(strict=True) until it is fixed


LOGIN = Expect("login")
NOT_FOUND = Expect(404)
OK = Expect("ok")


def forbid(perm, bug=""):
    return Expect(403, perm=str(perm), bug=bug)


def everyone(expect, anonymous=None):
    table = {role: expect for role in ROLES}
    if anonymous is not None:
        table["anonymous"] = anonymous
    return table


def object_read():
    return {
        "anonymous": LOGIN,
        "norole": NOT_FOUND,
        "viewer": OK,
        "operator": OK,
        "admin": OK,
        "other": NOT_FOUND,
    }


def object_action(perm, operator_may=True):
    return {
        "anonymous": LOGIN,
        "norole": NOT_FOUND,
        "viewer": forbid(perm),
        "operator": OK if operator_may else forbid(perm),
        "admin": OK,
        "other": NOT_FOUND,
    }


def project_list(own, foreign):
    """A list page: each user sees only their current project's objects."""
    return {
        "anonymous": LOGIN,
        "norole": Expect(200, absent=(own, foreign)),
        "viewer": Expect(200, contains=(own,), absent=(foreign,)),
        "operator": Expect(200, contains=(own,), absent=(foreign,)),
        "admin": Expect(200, contains=(own,), absent=(foreign,)),
        "other": Expect(200, contains=(foreign,), absent=(own,)),
    }


# Both fixed by the lead: vm_cluster shows a refusal outside the form, vm_create audits it.
TOKEN_AUDIT_BUG = ""  # fixed: the service refuses and audits


def create_form(perm):
    """The create form (and its field options): only for those who may create."""
    return {
        "anonymous": LOGIN,
        "norole": Expect(302),  # no project to create in: back to the list
        "viewer": forbid(perm),
        "operator": forbid(perm),
        "admin": Expect(200),
        "other": Expect(200),
    }


def create_post(perm, bug=""):
    return {
        "anonymous": LOGIN,
        "norole": Expect(302),
        "viewer": forbid(perm, bug=bug),
        "operator": forbid(perm, bug=bug),
        "admin": OK,
        "other": OK,
    }


# ---------------------------------------------------------------------------------------------
# The cases: URL name -> the requests to make. ``target`` names the scene object in the URL.


@dataclass(frozen=True)
class Case:
    method: str
    expect: dict
    target: str = ""
    data: object = None  # dict or callable(scene) -> dict
    query: str = ""
    audit: str = ""  # the audited action a POST performs
    effect: object = None  # callable(scene, user): asserts what success changed
    headers: dict = field(default_factory=dict)


def create_data(name, **fields):
    """A create form's POST of ``name`` in the first zone and type, naming another project
    (which must be ignored)."""

    def data(scene):
        w = scene.world
        zone, instance_type = w.zone_a.pk, w.h100.pk
        return {"name": name, "zone": zone, "instance_type": instance_type, **fields} | {
            "project": w.other.pk
        }

    return data


cluster_form = create_data("made-by-matrix", fabric_type="INFINIBAND")
vm_form = create_data("vm-by-matrix", billing_type="ON_DEMAND")


def created_in_own_project(model, name):
    def check(scene, user):
        obj = model.objects.get(name=name)
        own = scene.world.demo if user.username != "other" else scene.world.other
        assert obj.project_id == own.pk

    return check


def status_is(attr, status):
    def check(scene, user):
        obj = getattr(scene, attr)
        obj.refresh_from_db()
        assert obj.status == status

    return check


def vm_attached(scene, user):
    scene.vm.refresh_from_db()
    assert scene.vm.cluster_id == scene.cluster.pk


def vm_renamed(scene, user):
    scene.vm.refresh_from_db()
    assert scene.vm.name == "renamed-by-matrix"


def cluster_renamed(scene, user):
    scene.cluster.refresh_from_db()
    assert scene.cluster.name == "renamed-by-matrix"


def cluster_keys_chosen(scene, user):
    assert list(scene.cluster.ssh_keys.all()) == [scene.key]


def key_deleted(scene, user):
    assert not SshKey.objects.filter(pk=scene.key.pk).exists()


def hook_deleted(scene, user):
    assert not Webhook.objects.filter(pk=scene.hook.pk).exists()


def hook_tested(scene, user):
    assert WebhookDelivery.objects.get(webhook=scene.hook).event_type == "webhook.test"


def token_issued(scene, user):
    from metrics.models import MetricsToken

    assert MetricsToken.objects.filter(vm=scene.vm).exists()


def first_member(cluster):
    return cluster.members.order_by("pk").first()


def first_member_detached(scene, user):
    assert scene.cluster.members.count() == 1


def running_members(cluster, data):
    """Make ``cluster``'s members run (before the snapshot), then post ``data``."""
    cluster.members.update(status=VmStatus.RUNNING)
    return data


def operation_queued(kind, items):
    """The bulk start/stop made one Operation of ``items`` for the workers (whose steps run
    after commit: not in these tests)."""

    def check(scene, user):
        from clusters.models import Operation

        operation = Operation.objects.get(kind=kind, actor=user)
        assert operation.items.count() == items

    return check


def an_operation(scene):
    """A finished attach of the demo project's cluster, to read its progress."""
    from clusters.models import Operation

    return Operation.objects.create(
        project=scene.cluster.project,
        cluster=scene.cluster,
        actor=scene.world.admin,
        kind=Operation.Kind.ATTACH,
    )


def kept_as_spare(scene):
    """``scene.vm`` kept as a 예비 of ``scene.cluster`` (before the snapshot)."""
    ClusterSpare.objects.get_or_create(cluster=scene.cluster, vm=scene.vm)
    return {"vm": scene.vm.pk}


def spare_kept(scene, user):
    assert ClusterSpare.objects.filter(cluster=scene.cluster, vm=scene.vm).exists()


def spare_gone(scene, user):
    assert not ClusterSpare.objects.filter(vm=scene.vm).exists()


def policy_auto(scene, user):
    scene.cluster.refresh_from_db()
    assert scene.cluster.policy == "auto" and scene.cluster.policy_set_by == user


def spare_attached(scene, user):
    scene.vm.refresh_from_db()
    assert scene.vm.cluster_id == scene.cluster.pk


SAFE = {"HTTP_HX_REQUEST": "true"}


def creates(perm, form, audit, model, name):
    """A create page: its form, and its POST making ``name`` in the poster's own project."""
    return [
        Case("get", create_form(perm)),
        Case(
            "post",
            create_post(perm),
            data=form,
            audit=audit,
            effect=created_in_own_project(model, name),
        ),
    ]


def both(case):
    """``case`` as a plain request and as htmx's (``SAFE``): both answers must hold."""
    return [case, replace(case, headers=SAFE)]


def moves(target, perm, audit, status, operator_may=True):
    """A POST that moves ``target`` to ``status``, for those holding ``perm``."""
    return Case(
        "post",
        object_action(perm, operator_may),
        target=target,
        audit=audit,
        effect=status_is(target, status),
    )


MATRIX = {
    "home": [Case("get", everyone(Expect(302)))],
    "login": [Case("get", everyone(Expect(302), anonymous=Expect(200)))],
    "logout": [Case("post", everyone(Expect(302)))],
    "switch_project": [
        Case("post", everyone(Expect(302)), data=lambda s: {"project": s.world.demo.pk})
    ],
    "set_language": [Case("post", everyone(Expect(302)), data={"language": "en"})],
    "healthz": [Case("get", everyone(Expect(200)))],
    # A user's own API tokens: no project role needed to see the page; a token id that is
    # not the user's (here: none of theirs) is a 404 (tests/api/test_token_page.py).
    "api_tokens": [Case("get", everyone(Expect(200), anonymous=LOGIN))],
    "api_token_revoke": [Case("post", everyone(NOT_FOUND, anonymous=LOGIN), target="cluster")],
    # The current project's SSH keys: anyone signed in sees the page (their project's keys,
    # none without a role); registering needs SshKey CREATE, deleting DELETE, another
    # project's key is a 404 (tests/portal/test_ssh_keys.py).
    "ssh_keys": [
        Case("get", project_list("key", "other_key")),
        Case(
            "post",
            create_post(Perm.SSH_KEY_CREATE),
            data={"name": "key-by-matrix", "public_key": ED25519_OTHER},
            audit="ssh_key.create",
            effect=created_in_own_project(SshKey, "key-by-matrix"),
        ),
    ],
    "ssh_key_delete": [
        Case(
            "post",
            object_action(Perm.SSH_KEY_DELETE, operator_may=False),
            target="key",
            audit="ssh_key.delete",
            effect=key_deleted,
        )
    ],
    # The current project's webhooks, as its SSH keys: creating needs Webhook CREATE, a test
    # send UPDATE (the operator's too), deleting DELETE; another project's is a 404
    # (tests/webhooks/test_pages.py).
    "webhooks": [
        Case("get", project_list("hook", "other_hook")),
        Case(
            "post",
            create_post(Perm.WEBHOOK_CREATE),
            data={
                "name": "hook-by-matrix",
                "url": "https://hooks.example.com/m",
                "events": ["cluster.status_changed"],
            },
            audit="webhook.create",
            effect=created_in_own_project(Webhook, "hook-by-matrix"),
        ),
    ],
    "webhook_log": [Case("get", object_read(), target="hook")],
    "webhook_test": [
        Case(
            "post",
            object_action(Perm.WEBHOOK_UPDATE),
            target="hook",
            audit="webhook.test",
            effect=hook_tested,
        )
    ],
    "webhook_delete": [
        Case(
            "post",
            object_action(Perm.WEBHOOK_DELETE, operator_may=False),
            target="hook",
            audit="webhook.delete",
            effect=hook_deleted,
        )
    ],
    "clusters:cluster_list": [
        Case("get", project_list("cluster", "other_cluster")),
        Case("get", project_list("cluster", "other_cluster"), query="q=cluster&status=UNALLOCATED"),
    ],
    "clusters:cluster_create": creates(
        Perm.CLUSTER_CREATE, cluster_form, "cluster.create", VirtualCluster, "made-by-matrix"
    ),
    "clusters:cluster_form_options": [
        Case("get", create_form(Perm.CLUSTER_CREATE), query="zone=1&instance_type=1&name=x")
    ],
    "clusters:cluster_detail": [Case("get", object_read(), target="cluster")],
    "clusters:cluster_members": [Case("get", object_read(), target="cluster")],
    "clusters:cluster_metrics": [Case("get", object_read(), target="cluster")],
    "clusters:cluster_activity": [Case("get", object_read(), target="cluster")],
    "clusters:cluster_header": [Case("get", object_read(), target="cluster")],
    # 닫기 on the header's failed start: this session's choice, for anyone who reads the cluster.
    "clusters:cluster_dismiss": both(
        Case("post", object_read(), target="cluster", data={"operation": "1"})
    ),
    "clusters:cluster_hostfile": [Case("get", object_read(), target="running")],
    # Help: any signed-in user; the benchmark page of a cluster is read like its detail.
    "clusters:help": [Case("get", everyone(Expect(200), anonymous=LOGIN))],
    "clusters:infiniband_help": [Case("get", everyone(Expect(200), anonymous=LOGIN))],
    "clusters:cluster_infiniband": [Case("get", object_read(), target="running")],
    "clusters:cluster_start": both(
        moves("cluster", Perm.CLUSTER_UPDATE, "cluster.start", ClusterStatus.PROVISIONING)
    ),
    "clusters:cluster_stop": both(
        moves("running", Perm.CLUSTER_UPDATE, "cluster.stop", ClusterStatus.TERMINATED)
    ),
    "clusters:cluster_stop#with_members": [
        # 클러스터 중지 with 멤버 가상머신도 함께 중지: the running members are stopped first.
        Case(
            "post",
            object_action(Perm.CLUSTER_UPDATE),
            target="running",
            audit="operation.stop_cluster",
            data=lambda s: running_members(s.running, {"with_members": "1"}),
            effect=operation_queued("stop_cluster", 2),
            headers=SAFE,
        ),
    ],
    "clusters:cluster_delete": both(
        moves("cluster", Perm.CLUSTER_DELETE, "cluster.delete", ClusterStatus.DELETED, False)
    ),
    # 이름 변경 on the 정보 tab: the API's rename, CLUSTER UPDATE.
    "clusters:cluster_rename": both(
        Case(
            "post",
            object_action(Perm.CLUSTER_UPDATE),
            target="cluster",
            data={"name": "renamed-by-matrix"},
            audit="cluster.update",
            effect=cluster_renamed,
        )
    ),
    # SSH 키 변경 on the 정보 tab: the API's PATCH ssh_key_ids, CLUSTER UPDATE.
    "clusters:cluster_ssh_keys": both(
        Case(
            "post",
            object_action(Perm.CLUSTER_UPDATE),
            target="cluster",
            data=lambda s: {"ssh_keys": [s.key.pk]},
            audit="cluster.ssh_keys",
            effect=cluster_keys_chosen,
        )
    ),
    # The cluster page's bulk actions and the Operation's progress.
    "clusters:cluster_attach": [
        *both(Case("get", object_action(Perm.VM_UPDATE), target="cluster")),
        *both(
            Case(
                "post",
                object_action(Perm.VM_UPDATE),
                target="cluster",
                audit="operation.attach",
                data=lambda s: {"vm": [s.vm.pk]},
                effect=vm_attached,
            )
        ),
    ],
    "clusters:cluster_detach": [
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="cluster",
            audit="operation.detach",
            data=lambda s: {"vm": first_member(s.cluster).pk},
            effect=first_member_detached,
        ),
    ],
    "clusters:cluster_start_members": [
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="running",
            audit="operation.start_members",
            effect=operation_queued("start_members", 2),
            headers=SAFE,
        ),
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="running",
            audit="operation.start_members",
            data=lambda s: {"vm": [first_member(s.running).pk]},
            effect=operation_queued("start_members", 1),
        ),
    ],
    "clusters:cluster_stop_members": [
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="running",
            audit="operation.stop_members",
            data=lambda s: running_members(s.running, {}),
            effect=operation_queued("stop_members", 2),
            headers=SAFE,
        ),
    ],
    "clusters:operation_detail": both(Case("get", object_read(), target=an_operation)),
    # 작업 취소 on a progress card: the scene's operation is a finished attach (CLUSTER UPDATE
    # for any kind but a 교체), so who may cancel is told it cannot be (409).
    "clusters:operation_cancel": both(
        Case(
            "post",
            {**object_action(Perm.CLUSTER_UPDATE), "operator": Expect(409), "admin": Expect(409)},
            target=an_operation,
            audit="operation.cancel",
        )
    ),
    # 클러스터 검증 and 교체. The scene's running cluster has no running member, so a start
    # is refused by the rule (409) once the permission allows it.
    "clusters:validation_section": [Case("get", object_read(), target="cluster")],
    "clusters:validation_start": [
        Case(
            "post",
            {
                **object_action(Perm.CLUSTER_UPDATE),
                "operator": Expect(409),
                "admin": Expect(409),
            },
            target="running",
            audit="operation.validate",
        )
    ],
    # No ?job= (the scene has no run): every reader gets the 404 of a missing job.
    "clusters:validation_raw": [
        Case("get", {**everyone(NOT_FOUND), "anonymous": LOGIN}, target="cluster")
    ],
    "clusters:member_replace": [
        Case("get", {**everyone(NOT_FOUND), "anonymous": LOGIN}, target="cluster"),
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="cluster",
            audit="operation.replace",
            data=lambda s: {"member": s.cluster.members.first().pk, "spare": s.vm.pk},
            effect=spare_attached,
        ),
    ],
    # 교체 정책 and 예비 on the members tab: CLUSTER UPDATE (and VM UPDATE for a spare).
    "clusters:cluster_spares": [Case("get", object_read(), target="cluster")],
    "clusters:cluster_spare_add": both(
        Case(
            "post",
            object_action(Perm.CLUSTER_UPDATE),
            target="cluster",
            audit="cluster.spare_add",
            data=lambda s: {"vm": s.vm.pk},
            effect=spare_kept,
        )
    ),
    "clusters:cluster_spare_remove": both(
        Case(
            "post",
            object_action(Perm.CLUSTER_UPDATE),
            target="cluster",
            audit="cluster.spare_remove",
            data=kept_as_spare,
            effect=spare_gone,
        )
    ),
    "clusters:cluster_policy": both(
        Case(
            "post",
            object_action(Perm.CLUSTER_UPDATE),
            target="cluster",
            audit="cluster.policy",
            data={"policy": "auto"},
            effect=policy_auto,
        )
    ),
    "vms:vm_list": [Case("get", project_list("vm", "other_vm"))],
    "vms:vm_create": creates(Perm.VM_CREATE, vm_form, "vm.create", VirtualMachine, "vm-by-matrix"),
    "vms:vm_create#many": [
        Case(
            "post",
            create_post(Perm.VM_CREATE),
            data=lambda s: {**vm_form(s), "count": 2, "cluster": ""},
            audit="vm.create",
            effect=created_in_own_project(VirtualMachine, "vm-by-matrix-02"),
        ),
    ],
    "vms:vm_edit": [
        Case("get", object_read(), target="vm"),
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="vm",
            audit="vm.update",
            data={"name": "renamed-by-matrix"},
            effect=vm_renamed,
        ),
    ],
    "vms:vm_cluster": both(
        Case(
            "post",
            object_action(Perm.VM_UPDATE),
            target="vm",
            audit="vm.attach",
            data=lambda s: {"action": "attach", "cluster": s.cluster.pk},
            effect=vm_attached,
        )
    ),
    "vms:vm_status": [Case("get", object_read(), target="vm")],
    "vms:vm_start": both(moves("vm", Perm.VM_UPDATE, "vm.start", VmStatus.STARTING)),
    "vms:vm_stop": [moves("running_vm", Perm.VM_UPDATE, "vm.stop", VmStatus.STOPPING)],
    "vms:vm_delete": [moves("vm", Perm.VM_DELETE, "vm.delete", VmStatus.DELETED, False)],
    # The agents' API authenticates with a bearer token only: a session is worth nothing.
    "metrics:ingest": [Case("post", everyone(Expect(401)), data={})],
    "metrics:ingest_check": [Case("post", everyone(Expect(401)), data={})],
    "metrics:ingest_jobs_next": [Case("post", everyone(Expect(401)), data={})],
    "metrics:ingest_job_result": [Case("post", everyone(Expect(401)), data={})],
    "metrics:ingest_cluster": [Case("get", everyone(Expect(401)))],
    "metrics:ingest_host_keys": [Case("post", everyone(Expect(401)), data={})],
    # Their API's description is public, as /api/v1's is: it names no data.
    "metrics:agent_openapi": [Case("get", everyone(Expect("ok")))],
    "metrics:vm_token_rotate": [
        Case(
            "post",
            {**object_action(Perm.VM_UPDATE), "viewer": forbid(Perm.VM_UPDATE, TOKEN_AUDIT_BUG)},
            target="vm",
            audit="vm.metrics_token",
            effect=token_issued,
        ),
    ],
    "metrics:cluster_charts": [
        Case("get", object_read(), target="cluster"),
        Case("get", object_read(), target="cluster", query="range=7d&per_member=1"),
    ],
    "metrics:cluster_devices": [
        Case("get", object_read(), target="cluster"),
        Case("get", object_read(), target="cluster", query="range=24h"),
    ],
}


def url_name(entry: str) -> str:
    """``name#variant`` entries add cases to the URL ``name`` (a form's other mode)."""
    return entry.split("#", 1)[0]


def target_of(scene, case):
    if not case.target:
        return {}
    target = case.target(scene) if callable(case.target) else getattr(scene, case.target)
    return {"pk": target.pk}


def _matrix_params():
    params = []
    urls = discover_urls()
    for name in sorted(urls) + sorted(e for e in MATRIX if "#" in e):
        cases = MATRIX.get(name)
        if not cases:
            params.append(pytest.param(name, None, None, id=f"{name}-NO-MATRIX-ENTRY"))
            continue
        for index, case in enumerate(cases):
            for role in ROLES:
                expect = case.expect[role]
                marks = [pytest.mark.xfail(strict=True, reason=expect.bug)] if expect.bug else []
                params.append(
                    pytest.param(
                        name, index, role, id=f"{name}-{case.method}{index}-{role}", marks=marks
                    )
                )
    return params


def test_matrix_names_only_real_urls():
    """An entry for a URL that no longer exists is a stale promise: remove it."""
    assert sorted({url_name(entry) for entry in MATRIX} - set(discover_urls())) == []


def snapshot():
    return (
        sorted(
            VirtualCluster.objects.values_list(
                "pk", "name", "status", "project_id", "policy_row__policy"
            )
        ),
        sorted(ClusterSpare.objects.values_list("cluster_id", "vm_id")),
        sorted(
            VirtualMachine.objects.values_list("pk", "name", "status", "cluster_id", "project_id")
        ),
        sorted(SshKey.objects.values_list("pk", "name", "project_id")),
        sorted(Webhook.objects.values_list("pk", "name", "url", "project_id")),
        WebhookDelivery.objects.count(),
        sorted(
            VirtualCluster.ssh_keys.through.objects.values_list("virtualcluster_id", "sshkey_id")
        ),
    )


@pytest.mark.parametrize(("name", "index", "role"), _matrix_params())
def test_authorization_matrix(name, index, role, scene, client):
    if index is None:
        pytest.fail(f"URL {name!r} has no entry in the authorization MATRIX: add one")
    case = MATRIX[name][index]
    expect = case.expect[role]
    world = scene.world
    user = world.users.get(role)
    if user is not None:
        client.force_login(user)
    kwargs = target_of(scene, case)
    url = reverse(url_name(name), kwargs=kwargs) + (f"?{case.query}" if case.query else "")
    data = case.data(scene) if callable(case.data) else (case.data or {})
    before = snapshot()
    events_before = AuditEvent.objects.count()

    response = getattr(client, case.method)(url, data, **case.headers)

    body = response.content.decode("utf-8", "replace")
    location = response.get("Location", "") or response.get("HX-Redirect", "")
    if expect.status == "login":
        assert response.status_code == 302, body[:500]
        assert location.startswith(reverse("login")), location
    elif expect.status == "ok":
        assert response.status_code in (200, 302), (response.status_code, body[:500])
        assert not location.startswith(reverse("login")), location
    else:
        assert response.status_code == expect.status, (response.status_code, body[:500])
    if expect.perm:
        assert f"{expect.perm} 권한이 필요합니다." in body, body[:2000]
    for attr in expect.contains:
        assert getattr(scene, attr).name in body, f"{attr} should be listed"
    for attr in expect.absent:
        assert getattr(scene, attr).name not in body, f"{attr} must not be shown to {role}"
    if expect.text:
        assert expect.text in body

    if expect.status == "ok" and case.effect is not None:
        case.effect(scene, user)
    elif case.method == "post" and expect.status in ("login", 403, 404, 401):
        assert snapshot() == before, "a refused request changed the database"
    if case.audit and user is not None:
        new = AuditEvent.objects.filter(action=case.audit, actor=user)
        if expect.status == "ok":
            assert new.filter(outcome=AuditEvent.Outcome.SUCCEEDED).exists()
        elif expect.status == 403:
            refused = new.get(outcome=AuditEvent.Outcome.REFUSED)
            assert refused.params == {"permission": expect.perm} and expect.perm in refused.text
        elif expect.status in (404, "login"):
            # Invisible objects are refused before any service runs: nothing to audit.
            assert AuditEvent.objects.count() == events_before


@pytest.mark.parametrize(
    "name", sorted(n for n, cases in MATRIX.items() if any(c.method == "post" for c in cases))
)
def test_actions_refuse_get(name, scene, client):
    """Nothing changes state on GET (CSRF protection rests on that)."""
    client.force_login(scene.world.admin)
    case = next(c for c in MATRIX[name] if c.method == "post")
    same_url = [
        c for entry, cases in MATRIX.items() if url_name(entry) == url_name(name) for c in cases
    ]
    if any(c.method == "get" for c in same_url):
        pytest.skip("this URL also serves a page on GET")
    if name == "set_language":
        pytest.skip("Django's set_language only redirects on GET; it changes nothing")
    kwargs = target_of(scene, case)
    before = snapshot()
    response = client.get(reverse(url_name(name), kwargs=kwargs))
    assert response.status_code == 405
    assert snapshot() == before


@pytest.mark.parametrize(
    "name", sorted(n for n, cases in MATRIX.items() if any(c.method == "post" for c in cases))
)
def test_actions_need_csrf_token(name, scene):
    """A cross-site form post (a logged-in browser, no token) is refused with 403."""
    from django.test import Client

    if name.startswith("metrics:ingest"):
        pytest.skip("bearer-token API: no cookie, no CSRF")
    client = Client(enforce_csrf_checks=True)
    client.force_login(scene.world.admin)
    case = next(c for c in MATRIX[name] if c.method == "post")
    kwargs = target_of(scene, case)
    data = case.data(scene) if callable(case.data) else (case.data or {})
    before = snapshot()
    response = client.post(reverse(url_name(name), kwargs=kwargs), data)
    assert response.status_code == 403
    assert snapshot() == before


def test_superuser_sees_every_project(scene, client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    client.force_login(root)
    for obj in (scene.cluster, scene.other_cluster):
        assert client.get(reverse("clusters:cluster_detail", args=[obj.pk])).status_code == 200
