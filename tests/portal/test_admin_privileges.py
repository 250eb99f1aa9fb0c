"""Who may write what in the admin. A platform admin (superuser) changes anything; project
staff (``is_staff`` with a role in a project) use the admin for their projects without
model permissions granted by hand, may look at global rows (the catalog, roles, thresholds,
capacity, groups) but never change them, and never grant privileges beyond a project: not
``is_superuser``/``is_staff``/groups/model permissions, not on their own account.

Walks ``admin.site._registry``: a new admin is covered."""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from portal.admin import ConsoleAdmin
from portal.models import Role, RoleBinding
from tests.conftest import builtin_role

PASSWORD = "x-staff-pw-2026"


def url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def staff_client(world, *, role="admin", every_permission=True):
    """A staff user with a role in ``demo``; by default also every model permission there is
    (the worst case: permissions granted by hand must not reach global rows either)."""
    user = get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)
    if every_permission:
        user.user_permissions.set(Permission.objects.all())
    RoleBinding.objects.create(user=user, project=world.demo, role=builtin_role(role))
    client = Client()
    client.force_login(user)
    return client, user


def snapshot(model):
    return list(model._default_manager.order_by("pk").values())


@pytest.fixture
def root(world):
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password=PASSWORD))
    return client


def test_staff_cannot_grant_platform_privileges_to_a_project_member(world):
    client, _ops = staff_client(world)
    viewer = world.users["viewer"]
    group = Group.objects.create(name="everything")
    page = client.get(url(get_user_model(), "change", viewer.pk))
    assert page.status_code == 200
    for field in ("is_superuser", "is_staff", "groups", "user_permissions"):
        assert f'name="{field}"' not in page.content.decode(), field
    form = {
        "username": "viewer", "is_active": "on", "is_superuser": "on", "is_staff": "on",
        "groups": [group.pk], "user_permissions": [Permission.objects.first().pk],
        "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
        "role_bindings-TOTAL_FORMS": "0", "role_bindings-INITIAL_FORMS": "0",
    }  # fmt: skip
    client.post(url(get_user_model(), "change", viewer.pk), form)
    viewer.refresh_from_db()
    assert not viewer.is_superuser and not viewer.is_staff
    assert not viewer.groups.exists() and not viewer.user_permissions.exists()


def test_staff_cannot_change_their_own_account_or_role(world):
    client, ops = staff_client(world, role="viewer")
    form = {
        "username": "ops", "is_active": "on", "is_superuser": "on",
        "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
        "role_bindings-TOTAL_FORMS": "0", "role_bindings-INITIAL_FORMS": "0",
    }  # fmt: skip
    assert client.post(url(get_user_model(), "change", ops.pk), form).status_code == 403
    binding = RoleBinding.objects.get(user=ops)
    admin_role = builtin_role("admin")
    change = {"user": ops.pk, "project": world.demo.pk, "role": admin_role.pk}
    assert client.post(url(RoleBinding, "change", binding.pk), change).status_code == 403
    client.post(url(RoleBinding, "add"), change)  # a second binding for themself: refused
    ops.refresh_from_db()
    assert not ops.is_superuser
    assert list(RoleBinding.objects.filter(user=ops).values_list("role__name", flat=True)) == [
        "viewer"
    ]


def test_every_admin_decides_writes_in_one_place(world):
    """Every registered admin is a ``ConsoleAdmin``; one that is not project-scoped (its
    rows govern every project) is read-only to staff with every model permission."""
    _client, ops = staff_client(world)
    request = Client().get("/").wsgi_request
    request.user = ops
    global_models = []
    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, ConsoleAdmin), model
        if not model_admin.project_scoped:
            global_models.append(model._meta.label)
            assert not model_admin.has_add_permission(request), model
            assert not model_admin.has_change_permission(request), model
            assert not model_admin.has_delete_permission(request), model
    for label in (
        "portal.Role", "clusters.ValidationThreshold", "compute.SimulatorCapacity",
        "catalog.Zone", "catalog.InstanceType", "catalog.FabricOffering", "auth.Group",
    ):  # fmt: skip
        assert label in global_models


def test_posts_to_global_rows_change_nothing(world, root):
    """Every global row's change and delete page, and every global add page, as a POST."""
    from clusters.validation.thresholds import threshold_for
    from portal.compute.models import SimulatorCapacity

    SimulatorCapacity.objects.create(
        zone=world.zone_a, instance_type=world.h100, fabric="INFINIBAND", total_nodes=4
    )
    threshold_for(world.h100, "INFINIBAND")
    Group.objects.create(name="g")
    client, _ops = staff_client(world)
    global_admins = [m for m, a in admin.site._registry.items() if not a.project_scoped]
    before = {model: snapshot(model) for model in global_admins}
    for model in global_admins:
        assert client.post(url(model, "add"), {"name": "x"}).status_code == 403, model
        for obj in model._default_manager.all():
            for view in ("change", "delete"):
                response = client.post(url(model, view, quote(obj.pk)), {"post": "yes"})
                assert response.status_code == 403, (model, view)
            seen = 403 if admin.site._registry[model].platform_only else 200
            assert client.get(url(model, "change", quote(obj.pk))).status_code == seen, model
    assert {model: snapshot(model) for model in global_admins} == before
    role = Role.objects.get(name="admin")  # a platform admin still changes them
    form = {"name": "admin", "description": "changed", "permissions": role.permissions}
    assert root.post(url(Role, "change", role.pk), form).status_code == 302
    role.refresh_from_db()
    assert role.description == "changed"


def test_project_staff_use_the_admin_without_model_permissions(world):
    """A project admin made staff binds a project member to a role, with no permission
    granted by hand; a project viewer made staff looks but changes nothing."""
    client, _ops = staff_client(world, every_permission=False)
    assert client.get("/admin/").status_code == 200
    for model in admin.site._registry:
        # Groups and GPU hosts: a platform admin's business.
        expected = 403 if model is Group or admin.site._registry[model].platform_only else 200
        assert client.get(url(model, "changelist")).status_code == expected, model
    binding = RoleBinding.objects.get(user=world.users["viewer"])
    change = {
        "user": binding.user_id,
        "project": world.demo.pk,
        "role": builtin_role("operator").pk,
    }
    assert client.post(url(RoleBinding, "change", binding.pk), change).status_code == 302
    binding.refresh_from_db()
    assert binding.role.name == "operator"

    get_user_model().objects.filter(username="ops").delete()
    looker, _ops = staff_client(world, role="viewer", every_permission=False)
    assert looker.get(url(RoleBinding, "changelist")).status_code == 200
    back = {**change, "role": builtin_role("viewer").pk}
    assert looker.post(url(RoleBinding, "change", binding.pk), back).status_code == 403


def test_the_demo_has_a_project_staff_user(db, settings):
    settings.SIMULATOR_STEP_SECONDS = 0
    call_command("seed_demo")
    client = Client()
    assert client.login(username="staff", password="vc-demo-2026")
    assert client.get("/admin/").status_code == 200
    page = client.get(url(RoleBinding, "changelist"))
    assert page.status_code == 200
    assert "other" not in {b.project.slug for b in page.context["cl"].result_list}
    assert client.get(url(Role, "changelist")).status_code == 200


def test_staff_only_look_where_their_role_is_less_than_admin(world):
    """A staff user who is ``admin`` in one project and ``viewer`` in another manages the
    first only: in the second they set no password, change no account, binding, project or
    token (the model permissions a project admin gets are the same for every project, the
    role says which)."""
    from datetime import timedelta

    from django.utils import timezone

    from portal.models import ApiToken

    client, ops = staff_client(world, every_permission=False)
    RoleBinding.objects.create(user=ops, project=world.other, role=builtin_role("viewer"))
    theirs = world.users["other"]
    password = theirs.password
    user_url = reverse("admin:auth_user_password_change", args=[theirs.pk])
    new = {"password1": "taken-2026-x", "password2": "taken-2026-x", "usable_password": "true"}
    assert client.post(user_url, new).status_code == 403
    form = {
        "username": "renamed", "is_active": "on",
        "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
        "role_bindings-TOTAL_FORMS": "0", "role_bindings-INITIAL_FORMS": "0",
    }  # fmt: skip
    assert client.post(url(get_user_model(), "change", theirs.pk), form).status_code == 403
    theirs.refresh_from_db()
    assert (theirs.username, theirs.password) == ("other", password)

    binding = RoleBinding.objects.get(user=theirs, project=world.other)
    viewer = builtin_role("viewer")
    change = {"user": theirs.pk, "project": world.other.pk, "role": viewer.pk}
    assert client.post(url(RoleBinding, "change", binding.pk), change).status_code == 403
    assert client.post(url(RoleBinding, "delete", binding.pk), {"post": "yes"}).status_code == 403
    helper = get_user_model().objects.create_user("helper")
    added = {"user": helper.pk, "project": world.other.pk, "role": builtin_role("admin").pk}
    client.post(url(RoleBinding, "add"), added)
    assert not RoleBinding.objects.filter(user=helper).exists()
    assert RoleBinding.objects.get(pk=binding.pk).role.name == "admin"

    project = {"name": "taken", "slug": "other", "bindings-TOTAL_FORMS": "0",
               "bindings-INITIAL_FORMS": "0"}  # fmt: skip
    assert client.post(url(type(world.other), "change", world.other.pk), project).status_code == 403
    world.other.refresh_from_db()
    assert world.other.name != "taken"

    token = ApiToken.objects.create(
        user=theirs, project=world.other, name="theirs", token_hash="b4" * 32,
        prefix="vcp_theirs", expires_at=timezone.now() + timedelta(days=30),
    )  # fmt: skip
    revoke = {"action": "revoke", "_selected_action": [token.pk], "post": "yes"}
    client.post(url(ApiToken, "changelist"), revoke)
    token.refresh_from_db()
    assert token.revoked_at is None

    mine = RoleBinding.objects.get(user=world.users["viewer"], project=world.demo)
    change = {"user": mine.user_id, "project": world.demo.pk, "role": builtin_role("operator").pk}
    assert client.post(url(RoleBinding, "change", mine.pk), change).status_code == 302


def test_staff_set_no_password_of_an_existing_account(world):
    """Binding an account that has no role yet into one's own project must not make it one's
    own: setting the password of an existing account is a platform admin's (or its owner's),
    never a project admin's, or a bind followed by a reset takes the account over."""
    client, _ops = staff_client(world, every_permission=False)
    loner = get_user_model().objects.create_user("loner", password=PASSWORD)
    password = loner.password
    RoleBinding.objects.create(user=loner, project=world.demo, role=builtin_role("viewer"))
    page = reverse("admin:auth_user_password_change", args=[loner.pk])
    new = {"password1": "taken-2026-x", "password2": "taken-2026-x", "usable_password": "true"}
    assert client.get(page).status_code == 403
    assert client.post(page, new).status_code == 403
    loner.refresh_from_db()
    assert loner.password == password
    root = Client()
    root.force_login(get_user_model().objects.create_superuser("root", password=PASSWORD))
    assert root.post(page, new).status_code == 302  # a platform admin still can
