"""The permission gate (docs/rules.md#permissions): has_perm per project, restrict(), 404
outside, 403 named."""

import pytest
from django.core.management import call_command

from clusters.models import VirtualCluster
from portal.iam.permissions import BUILTIN_ROLES, Perm
from portal.models import AuditEvent, Project, Role, RoleBinding
from vms.models import VirtualMachine


def test_builtin_roles_come_from_the_data_migration(db):
    roles = {r.name: set(r.permissions) for r in Role.objects.all()}
    assert roles == {name: {str(p) for p in perms} for name, perms in BUILTIN_ROLES.items()}


@pytest.mark.parametrize("perm", list(Perm))
def test_each_permission_granted_exactly_by_a_role_holding_it(world, perm):
    role = Role.objects.create(name=f"only-{perm}", permissions=[str(perm)])
    holder = world.users["norole"]
    cluster = world.cluster()
    assert not holder.has_perm(str(perm), world.demo)
    RoleBinding.objects.create(user=holder, project=world.demo, role=role)
    holder = type(holder).objects.get(pk=holder.pk)  # fresh: the cache lives on the instance
    assert holder.has_perm(str(perm), world.demo)
    assert holder.has_perm(str(perm), cluster)
    assert not holder.has_perm(str(perm), world.other)
    others = [p for p in Perm if p != perm]
    assert not any(holder.has_perm(str(p), world.demo) for p in others)


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("viewer", {Perm.CLUSTER_READ, Perm.VM_READ, Perm.SSH_KEY_READ, Perm.WEBHOOK_READ}),
        (
            "operator",
            {
                *(Perm.CLUSTER_READ, Perm.VM_READ, Perm.SSH_KEY_READ, Perm.WEBHOOK_READ),
                *(Perm.CLUSTER_UPDATE, Perm.VM_UPDATE, Perm.WEBHOOK_UPDATE),
            },
        ),
        ("admin", set(Perm)),
        ("other", set()),
        ("norole", set()),
    ],
)
def test_builtin_roles_on_demo(world, user, expected):
    u = world.users[user]
    assert {p for p in Perm if u.has_perm(str(p), world.demo)} == expected


def test_superuser_bypasses_roles_and_unknown_strings_are_never_granted(world):
    root = world.users["norole"]
    root.is_superuser = True
    assert root.has_perm(str(Perm.CLUSTER_DELETE), world.other)
    assert not world.admin.has_perm("Resource.VirtualCluster.EVERYTHING", world.demo)
    assert not world.admin.has_perm(str(Perm.CLUSTER_READ))  # no object, no project


def test_restrict_returns_only_the_projects_granting_it(world):
    mine, theirs = world.cluster("mine"), world.cluster("theirs", project=world.other)
    world.vm("vm-mine")
    restrict = VirtualCluster.objects.restrict
    assert list(restrict(world.users["viewer"], Perm.CLUSTER_READ)) == [mine]
    assert list(restrict(world.users["viewer"], Perm.CLUSTER_UPDATE)) == []
    assert list(restrict(world.users["other"], Perm.CLUSTER_READ)) == [theirs]
    assert list(restrict(world.users["norole"], Perm.CLUSTER_READ)) == []
    assert VirtualMachine.objects.restrict(world.users["other"], Perm.VM_READ).count() == 0


def test_other_project_gets_404_on_demo_objects(world, login):
    cluster = world.cluster()
    vm = world.vm("n1")
    client = login("other")
    for url in (f"/clusters/{cluster.pk}/", f"/clusters/{cluster.pk}/vms/", f"/vms/{vm.pk}/"):
        assert client.get(url).status_code == 404
    assert client.post(f"/clusters/{cluster.pk}/start/").status_code == 404
    assert client.post(f"/vms/{vm.pk}/start/").status_code == 404


def test_anonymous_is_sent_to_login(world, client):
    cluster = world.cluster()
    for url in ("/clusters/", f"/clusters/{cluster.pk}/", "/vms/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client.post(f"/clusters/{cluster.pk}/start/").status_code == 302


def create_form(world):
    """The cluster create form, filled in."""
    return {
        "name": "x",
        "zone": world.zone_a.pk,
        "instance_type": world.h100.pk,
        "fabric_type": "INFINIBAND",
    }


def test_refusal_names_the_permission_with_403(world, login):
    client = login("viewer")
    response = client.post("/clusters/new/", create_form(world))
    assert response.status_code == 403
    assert "Resource.VirtualCluster.CREATE 권한이 필요합니다." in response.content.decode()
    assert not VirtualCluster.objects.exists()
    assert AuditEvent.objects.get(action="cluster.create").outcome == "REFUSED"


def test_project_switcher_refuses_a_tampered_project(world, login):
    client = login("admin")
    response = client.post("/project/", {"project": world.other.pk}, follow=True)
    assert response.status_code == 200
    assert "선택할 수 없는 프로젝트입니다." in response.content.decode()
    assert client.session.get("project_id") != world.other.pk
    for bad in ("abc", "", "999999", "<script>"):
        assert client.post("/project/", {"project": bad}).status_code == 302


def test_project_switcher_remembers_the_choice(world, login):
    second = Project.objects.create(slug="second", name="second")
    RoleBinding.objects.create(
        user=world.admin, project=second, role=Role.objects.get(name="viewer")
    )
    world.cluster("in-second", project=second)
    client = login("admin")
    client.post("/project/", {"project": second.pk})
    assert "in-second" in client.get("/clusters/").content.decode()


def test_wrong_password_and_missing_csrf(world, client):
    response = client.post("/login/", {"username": "admin", "password": "nope"})
    assert response.status_code == 200
    assert "사용자 이름 또는 비밀번호가 올바르지 않습니다" in response.content.decode()
    strict = type(client)(enforce_csrf_checks=True)
    strict.force_login(world.admin)
    response = strict.post("/clusters/new/", create_form(world))
    assert response.status_code == 403
    assert "보안 토큰이 없거나 만료되었습니다" in response.content.decode()
    assert not VirtualCluster.objects.exists()


def test_korean_by_default_whatever_the_browser_says(world, login):
    client = login("admin")
    page = client.get("/clusters/", HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9").content.decode()
    assert "가상 클러스터 생성" in page
    client.post("/i18n/setlang/", {"language": "en", "next": "/clusters/"})
    page = client.get("/clusters/").content.decode()
    assert "Create virtual cluster" in page


def test_seed_demo_twice_gives_the_same_data(db, settings):
    settings.SIMULATOR_STEP_SECONDS = 0

    def snapshot():
        return {
            "users": sorted(
                (b.user.username, b.project.slug, b.role.name)
                for b in RoleBinding.objects.select_related("user", "project", "role")
            ),
            "vms": sorted(
                VirtualMachine.objects.values_list(
                    "project__slug",
                    "name",
                    "zone__code",
                    "instance_type__code",
                    "billing_type",
                    "disaster_recovery",
                    "status",
                    "private_ip",
                )
            ),
            "projects": sorted(Project.objects.values_list("slug", flat=True)),
        }

    call_command("seed_demo")
    first = snapshot()
    call_command("seed_demo")
    assert snapshot() == first
    assert len(first["vms"]) == 11
    assert ("admin", "demo", "admin") in first["users"]
