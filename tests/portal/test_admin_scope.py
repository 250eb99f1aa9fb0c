"""The admin is scoped like the console. A staff user with every ``view_*`` model permission
and a role only in ``demo`` sees nothing of project ``other`` on any admin page: changelists
(and their filters), change, delete and history pages, and no action touches ``other``'s
rows. Driven from ``admin.site._registry``, so a new admin is covered."""

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from metrics.models import MetricsToken
from portal.catalog.models import FabricType
from portal.compute.backends.simulator import SimulatorBackend
from portal.models import ApiToken, AuditEvent, Project, RoleBinding
from tests.conftest import builtin_role

SECRET = "zeta"  # in every name of project other's data, nowhere else
DEMO_TOKEN_HASH = "d3" * 32
DEMO_API_HASH = "a7" * 32


def url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def other_data(world):
    """Project ``other`` (renamed so its data is recognisable) with one row of every kind."""
    world.other.name = f"{SECRET}-project"
    world.other.save()
    backend = SimulatorBackend()
    for project, prefix in ((world.other, SECRET), (world.demo, "mine")):
        cluster = world.cluster(
            f"{prefix}-cluster", project=project, fabric_type=FabricType.ROCE_V2
        )
        members = world.members(cluster, 2, prefix=f"{prefix}-vm")
        backend.allocate(cluster, 2)
        MetricsToken.objects.create(
            vm=members[0],
            token_hash=f"{SECRET}{'0' * 60}" if project == world.other else DEMO_TOKEN_HASH,
            prefix=f"{prefix}tok",
            created_by=world.users["other"] if project == world.other else world.admin,
            created_at=timezone.now(),
        )
        ApiToken.objects.create(
            user=world.users["other"] if project == world.other else world.admin,
            project=project,
            name=f"{prefix}-api-token",
            token_hash=f"{SECRET}{'1' * 60}" if project == world.other else DEMO_API_HASH,
            prefix=f"vcp_{prefix}"[:12],
            expires_at=timezone.now() + timedelta(days=30),
        )
        AuditEvent.objects.create(
            project=project,
            action="cluster.start",
            target_type="cluster",
            target_name=f"{prefix}-event",
            outcome=AuditEvent.Outcome.SUCCEEDED,
        )
    return world


@pytest.fixture(params=["view_", ""], ids=["view-permissions", "all-permissions"])
def staff(other_data, client, request):
    """A staff user with every ``view_*`` permission, and one with every model permission:
    Django's permissions say what kind of thing, the roles say whose."""
    user = get_user_model().objects.create_user("ops", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith=request.param))
    RoleBinding.objects.create(user=user, project=other_data.demo, role=builtin_role("admin"))
    client.force_login(user)
    return client


@pytest.fixture
def root(other_data):
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    return client


def secret_objects(root):
    """{model: [objects]} whose change page, as a superuser, shows project other's data."""
    found = {}
    for model in admin.site._registry:
        for obj in model._default_manager.all():
            page = root.get(url(model, "change", quote(obj.pk)))
            assert page.status_code == 200, (model, obj.pk)
            if SECRET in page.content.decode():
                found.setdefault(model, []).append(obj)
    return found


PROJECT_DATA = (
    "clusters.VirtualCluster",
    "vms.VirtualMachine",
    "metrics.MetricsToken",
    "compute.SimulatorAllocation",
    "portal.AuditEvent",
    "portal.Project",
    "portal.ApiToken",
)


# The platform's GPU hosts and what is placed on them: superusers only (403 to staff).
SUPERUSER_ONLY = ("compute.GpuHost", "compute.Placement", "compute.FabricPartition")


def test_every_admin_changelist_and_filter_hides_other_projects(staff, root):
    leaks = []
    for model in admin.site._registry:
        page = staff.get(url(model, "changelist"))
        assert page.status_code == (403 if model._meta.label in SUPERUSER_ONLY else 200), model
        if SECRET in page.content.decode():
            leaks.append(model._meta.label)
    assert leaks == []
    for model in admin.site._registry:  # superusers see all
        if model._meta.label in PROJECT_DATA:
            assert SECRET in root.get(url(model, "changelist")).content.decode(), model


@pytest.mark.slow
def test_no_change_delete_or_history_page_shows_other_projects(staff, root):
    found = secret_objects(root)
    # The fixture gave project other a row of each kind: the check below has something to do.
    for model in PROJECT_DATA:
        assert any(m._meta.label == model for m in found), model
    leaks = []
    # Every object, not only other's: deleting a zone or a role lists the rows that use it.
    for model in admin.site._registry:
        for obj in model._default_manager.all():
            for view in ("change", "delete", "history"):
                page = staff.get(url(model, view, quote(obj.pk)))
                if page.status_code == 200 and SECRET in page.content.decode():
                    leaks.append(f"{model._meta.label} {obj} {view}")
    assert leaks == []


@pytest.mark.slow
def test_no_admin_action_touches_other_projects(staff, root, other_data):
    found = secret_objects(root)

    def snapshot():
        return {
            model: list(model._default_manager.filter(pk__in=[o.pk for o in objects]).values())
            for model, objects in found.items()
        }

    before, events = snapshot(), AuditEvent.objects.count()
    for model, objects in found.items():
        model_admin = admin.site._registry[model]
        for action in model_admin.get_actions(staff.get(url(model, "changelist")).wsgi_request):
            staff.post(
                url(model, "changelist"),
                {"action": action, "_selected_action": [o.pk for o in objects], "post": "yes"},
            )
    assert snapshot() == before
    assert AuditEvent.objects.count() == events


@pytest.mark.parametrize(
    ("model", "token_hash", "shown"),
    [(MetricsToken, DEMO_TOKEN_HASH, "minetok"), (ApiToken, DEMO_API_HASH, "mine-api-token")],
)
def test_the_token_hash_is_never_shown(root, other_data, model, token_hash, shown):
    token = model.objects.get(token_hash=token_hash)
    for page in (url(model, "changelist"), url(model, "change", token.pk)):
        content = root.get(page).content.decode()
        assert shown in content and token_hash not in content


def test_no_autocomplete_offers_other_projects(staff, root):
    asked = 0
    for model, model_admin in admin.site._registry.items():
        holders = [model_admin, *(inline(model, admin.site) for inline in model_admin.inlines)]
        for holder in holders:
            for field in holder.autocomplete_fields:
                params = {
                    "app_label": holder.model._meta.app_label,
                    "model_name": holder.model._meta.model_name,
                    "field_name": field,
                    "term": "",
                }
                response = staff.get(reverse("admin:autocomplete"), params)
                assert response.status_code == 200, (holder, field)
                assert SECRET not in response.content.decode(), (holder, field)
                asked += 1
    assert asked >= 3


def test_filtering_users_by_another_project_lists_no_one(staff, root, other_data):
    """(With one project the filter is not shown, hence not applied: the staff user is in two.)"""
    third = Project.objects.create(slug="third", name="third")
    ops = get_user_model().objects.get(username="ops")
    RoleBinding.objects.create(user=ops, project=third, role=builtin_role("viewer"))
    users = url(get_user_model(), "changelist")
    mine = {"role_bindings__project__id__exact": other_data.demo.pk}
    assert staff.get(users, mine).context["cl"].result_count == 4  # admin, operator, viewer, ops
    theirs = {"role_bindings__project__id__exact": other_data.other.pk}
    assert root.get(users, theirs).context["cl"].result_count == 1
    assert staff.get(users, theirs).context["cl"].result_count == 0
    assert staff.get(users, {"role_bindings__project__id__exact": "x"}).status_code in (200, 302)


def test_revoking_an_api_token_in_the_admin(other_data, client):
    """A project admin with the model permission revokes a leaked token of their project:
    it gets 401 at once, the revoke is audited, another project's token is untouched."""
    from portal.iam import tokens

    ops = get_user_model().objects.create_user("ops", is_staff=True)
    ops.user_permissions.set(
        Permission.objects.filter(codename__in=["view_apitoken", "change_apitoken"])
    )
    RoleBinding.objects.create(user=ops, project=other_data.demo, role=builtin_role("admin"))
    client.force_login(ops)
    token, secret = tokens.issue_token(
        user=other_data.admin, project_id=other_data.demo.pk, name="leaked"
    )
    theirs = ApiToken.objects.get(token_hash=f"{SECRET}{'1' * 60}")
    api = "/api/v1/virtual-clusters"
    assert client.get(api, headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    page = client.get(url(ApiToken, "change", token.pk))
    assert page.status_code == 200 and b'name="_save"' not in page.content  # shown, not edited
    response = client.post(
        url(ApiToken, "changelist"),
        {"action": "revoke", "_selected_action": [token.pk, theirs.pk], "post": "yes"},
        follow=True,
    )
    assert "API 토큰 1개를 폐기했습니다." in response.content.decode()
    token.refresh_from_db()
    theirs.refresh_from_db()
    assert token.revoked_at is not None and theirs.revoked_at is None
    assert client.get(api, headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    event = AuditEvent.objects.get(action="token.revoke")
    assert (event.actor, event.target_id, event.project_id) == (ops, token.pk, other_data.demo.pk)


def test_a_viewer_of_api_tokens_has_no_revoke(other_data, client):
    """Staff whose role in the project is a viewer's see its tokens (Django's view
    permission or the role's) but revoke none."""
    ops = get_user_model().objects.create_user("ops", is_staff=True)
    ops.user_permissions.set(Permission.objects.filter(codename="view_apitoken"))
    RoleBinding.objects.create(user=ops, project=other_data.demo, role=builtin_role("viewer"))
    client.force_login(ops)
    page = client.get(url(ApiToken, "changelist"))
    assert page.status_code == 200 and "mine-api-token" in page.content.decode()
    assert "revoke" not in page.context["cl"].model_admin.get_actions(page.wsgi_request)


def test_an_api_token_is_revoked_never_deleted(other_data, root):
    """Deleting would end a token without an audit event and lose its record."""
    token = ApiToken.objects.get(token_hash=DEMO_API_HASH)
    page = root.get(url(ApiToken, "changelist"))
    assert "delete_selected" not in page.context["cl"].model_admin.get_actions(page.wsgi_request)
    assert root.get(url(ApiToken, "delete", token.pk)).status_code == 403
