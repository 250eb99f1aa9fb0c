"""Forged form fields and parameters: what a browser never sends but an attacker does.
Each is refused, or ignored so the change lands where the user may act."""

import pytest
from django.urls import reverse

from clusters import services as cluster_services
from clusters.models import VirtualCluster
from portal.foundation.errors import NotFound
from portal.iam.projects import SESSION_KEY
from portal.models import Role, RoleBinding
from vms.models import VirtualMachine


@pytest.fixture
def both(scene, django_user_model):
    """An admin of ``demo`` who is also admin of ``other``: cross-project moves must still fail."""
    user = django_user_model.objects.create_user("both")
    for project in (scene.world.demo, scene.world.other):
        RoleBinding.objects.create(user=user, project=project, role=Role.objects.get(name="admin"))
    return user


def _snapshot_vm(vm):
    vm.refresh_from_db()
    return (vm.cluster_id, vm.status, vm.name, vm.project_id)


@pytest.mark.parametrize("username", ["admin", "operator", "both"])
@pytest.mark.parametrize("htmx", [False, True])
def test_attach_to_another_projects_cluster_is_refused(scene, client, both, username, htmx):
    user = both if username == "both" else scene.world.users[username]
    client.force_login(user)
    before = _snapshot_vm(scene.vm)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.post(
        reverse("vms:vm_cluster", args=[scene.vm.pk]),
        {"action": "attach", "cluster": scene.other_cluster.pk},
        **headers,
    )
    assert response.status_code == 422
    # The choice is not among the offered (eligible) clusters; the other cluster is not named.
    assert scene.other_cluster.name not in response.content.decode()
    assert _snapshot_vm(scene.vm) == before
    assert not scene.other_cluster.members.exists()


def test_attach_service_refuses_a_cluster_of_another_project(scene, both):
    """The same forgery one level down: the service, not only the form, refuses it."""
    with pytest.raises(NotFound):
        cluster_services.attach_vm(scene.vm.pk, scene.other_cluster.pk, actor=both)
    with pytest.raises(NotFound):
        cluster_services.attach_vm(scene.other_vm.pk, scene.cluster.pk, actor=both)
    # Even the system (actor=None) never joins projects.
    with pytest.raises(NotFound):
        cluster_services.attach_vm(scene.vm.pk, scene.other_cluster.pk, actor=None)
    assert _snapshot_vm(scene.vm)[0] is None


@pytest.mark.parametrize(
    "cluster_value", ["999999999", "-1", "0", "1e3", "abc", "", "1 OR 1=1", "９"]
)
def test_attach_with_nonsense_cluster_ids(scene, client, cluster_value):
    client.force_login(scene.world.admin)
    response = client.post(
        reverse("vms:vm_cluster", args=[scene.vm.pk]),
        {"action": "attach", "cluster": cluster_value},
    )
    assert response.status_code == 422
    assert _snapshot_vm(scene.vm)[0] is None


def test_detach_or_act_on_a_vm_of_another_project(scene, client):
    client.force_login(scene.world.admin)
    for name, data in [
        ("vms:vm_cluster", {"action": "detach"}),
        ("vms:vm_start", {}),
        ("vms:vm_delete", {}),
        ("vms:vm_edit", {"name": "stolen"}),
    ]:
        before = _snapshot_vm(scene.other_vm)
        response = client.post(reverse(name, args=[scene.other_vm.pk]), data)
        assert response.status_code == 404, name
        assert _snapshot_vm(scene.other_vm) == before


CREATE_FORMS = {
    "cluster": ("clusters:cluster_create", VirtualCluster, {"fabric_type": "INFINIBAND"}),
    "vm": ("vms:vm_create", VirtualMachine, {"billing_type": "ON_DEMAND"}),
}


@pytest.mark.parametrize(
    ("kind", "username"), [("cluster", "admin"), ("cluster", "both"), ("vm", "admin")]
)
def test_project_field_in_a_create_form_is_ignored(scene, client, both, kind, username):
    """A create form naming another project (``project``, ``project_id``) creates in the
    user's current project."""
    client.force_login(both if username == "both" else scene.world.admin)
    session = client.session
    session[SESSION_KEY] = scene.world.demo.pk
    session.save()
    w = scene.world
    url, model, fields = CREATE_FORMS[kind]
    forged = {"project": w.other.pk, "project_id": w.other.pk}
    form = {"name": "forged-project", "zone": w.zone_a.pk, "instance_type": w.h100.pk}
    response = client.post(reverse(url), {**form, **fields, **forged})
    assert response.status_code == 302
    assert model.objects.get(name="forged-project").project_id == w.demo.pk


def test_switching_to_a_project_without_a_role_is_refused(scene, client):
    client.force_login(scene.world.admin)
    response = client.post(
        reverse("switch_project"), {"project": scene.world.other.pk}, follow=True
    )
    assert "선택할 수 없는 프로젝트입니다." in response.content.decode()
    assert client.session.get(SESSION_KEY) != scene.world.other.pk
    page = client.get(reverse("clusters:cluster_list")).content.decode()
    assert scene.other_cluster.name not in page
    assert scene.cluster.name in page


def test_a_stale_session_project_falls_back_to_a_visible_one(scene, client):
    """A role removed while logged in: the session's project must stop being shown."""
    client.force_login(scene.world.admin)
    session = client.session
    session[SESSION_KEY] = scene.world.other.pk  # as if the role there was just revoked
    session.save()
    page = client.get(reverse("clusters:cluster_list")).content.decode()
    assert scene.other_cluster.name not in page


@pytest.mark.parametrize(
    "next_url",
    ["https://evil.example/", "//evil.example/", "http:evil.example", "javascript:alert(1)"],
)
def test_switch_project_does_not_redirect_off_site(scene, client, next_url):
    client.force_login(scene.world.admin)
    response = client.post(
        reverse("switch_project"), {"project": scene.world.demo.pk, "next": next_url}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("clusters:cluster_list")


@pytest.mark.parametrize(
    "next_url",
    [
        "https://evil.example/",
        "//evil.example/",
        # Passes the view's own check, but Django escapes the backslash (/%5Cevil...):
        # browsers then stay on this host.
        "/\\evil.example/",
    ],
)
def test_vm_action_next_does_not_redirect_off_site(scene, client, next_url):
    client.force_login(scene.world.admin)
    response = client.post(reverse("vms:vm_start", args=[scene.vm.pk]), {"next": next_url})
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\")), location


@pytest.mark.parametrize(
    "next_url", ["https://evil.example/", "//evil.example/", "/\\evil.example"]
)
def test_login_next_does_not_redirect_off_site(scene, client, next_url):
    from tests.conftest import PASSWORD

    response = client.post(
        reverse("login"), {"username": "viewer", "password": PASSWORD, "next": next_url}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("clusters:cluster_list")


def test_forged_request_id_is_replaced(client, scene):
    client.force_login(scene.world.admin)
    for forged in ["a" * 33, "abc def", "x\u200by", "../../etc"]:
        response = client.get(reverse("healthz"), HTTP_X_REQUEST_ID=forged)
        rid = response["X-Request-ID"]
        assert rid != forged and rid.isalnum() and len(rid) == 32
