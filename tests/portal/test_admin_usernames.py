"""Project staff see only their projects' usernames in the admin: who is in another project
is that project's business. A staff user with a role only in ``demo`` finds no account of
project ``other`` (nor one in no project) in any admin page a staff user can open — the
changelists and their filters, every add and change form's user choices, the autocompletes,
a user's change and history pages — and cannot bind one by its id. An account they add
themselves (where a platform admin lets them add accounts) stays theirs to see, so it can
be bound next. Superusers see every account.
"""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import NoReverseMatch, reverse

from clusters.models import ClusterStatus
from portal.admin.scope import visible_users
from portal.models import AuditEvent, RoleBinding
from tests.conftest import builtin_role

SECRET = "zeta"  # in the username of every account the staff user must not see


def url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def strangers(world):
    """An admin of project other, a viewer of other, an account in no project: each named
    with the secret, each with rows of their own (a cluster created, an audit event)."""
    User = get_user_model()
    made = {
        "admin": User.objects.create_user(f"{SECRET}-other-admin"),
        "viewer": User.objects.create_user(f"{SECRET}-other-viewer"),
        "loner": User.objects.create_user(f"{SECRET}-loner"),
    }
    RoleBinding.objects.create(user=made["admin"], project=world.other, role=builtin_role("admin"))
    RoleBinding.objects.create(
        user=made["viewer"], project=world.other, role=builtin_role("viewer")
    )
    world.cluster(f"{SECRET}-c", project=world.other, created_by=made["admin"])
    AuditEvent.objects.create(
        project=world.other, actor=made["admin"], action="cluster.start", target_type="cluster",
        target_name="x", outcome=AuditEvent.Outcome.SUCCEEDED,
    )  # fmt: skip
    # A demo cluster, so the staff user's pages have rows too.
    world.cluster("mine", status=ClusterStatus.UNALLOCATED, created_by=world.admin)
    return made


@pytest.fixture
def staff(world, strangers, client):
    """Project staff: ``is_staff`` and the admin role in demo (the demo seed's ``staff``)."""
    user = get_user_model().objects.create_user("ops", is_staff=True)
    RoleBinding.objects.create(user=user, project=world.demo, role=builtin_role("admin"))
    client.force_login(user)
    client.user = user
    return client


def pages_of(model, model_admin):
    """Every page of an admin a staff user might open with no object in mind."""
    for view in ("changelist", "add"):
        try:
            yield url(model, view)
        except NoReverseMatch:
            continue


def test_no_admin_page_names_another_projects_account(staff, strangers, world):
    shown = []
    for model, model_admin in admin.site._registry.items():
        pages = list(pages_of(model, model_admin))
        # and the change page of every row the staff user may open (its choices of users)
        listed = staff.get(url(model, "changelist"))
        if listed.status_code == 200:
            pages += [url(model, "change", quote(o.pk)) for o in listed.context["cl"].result_list]
        for page in pages:
            response = staff.get(page)
            if response.status_code == 200 and SECRET in response.content.decode():
                shown.append(page)
    # The user list with each of its filters, including another project asked for by id.
    users = url(get_user_model(), "changelist")
    for query in (
        {"role_bindings__project__id__exact": world.other.pk},
        {"role_bindings__role__id__exact": builtin_role("admin").pk},
    ):
        response = staff.get(users, query)
        if SECRET in response.content.decode():
            shown.append(f"{users}?{query}")
    assert shown == []
    assert staff.get(users, {"q": SECRET}).context["cl"].result_count == 0  # the search too
    listed = staff.get(users).context["cl"].result_list
    assert {u.username for u in listed} == {"admin", "operator", "viewer", "ops"}


def test_another_projects_account_has_no_page(staff, strangers):
    User = get_user_model()
    for user in strangers.values():
        for view in ("change", "history", "delete", "password_change"):
            response = staff.get(url(User, view, quote(user.pk)))
            assert response.status_code in (302, 403, 404), (user, view)
            assert SECRET not in response.content.decode()


def test_no_autocomplete_offers_another_projects_account(staff):
    asked = 0
    for model, model_admin in admin.site._registry.items():
        holders = [model_admin, *(inline(model, admin.site) for inline in model_admin.inlines)]
        for holder in holders:
            for field in holder.autocomplete_fields:
                for term in ("", SECRET, "a"):
                    response = staff.get(
                        reverse("admin:autocomplete"),
                        {
                            "app_label": holder.model._meta.app_label,
                            "model_name": holder.model._meta.model_name,
                            "field_name": field,
                            "term": term,
                        },
                    )
                    assert response.status_code == 200, (holder, field)
                    assert SECRET not in response.content.decode(), (holder, field, term)
                    asked += 1
    assert asked >= 9
    found = staff.get(
        reverse("admin:autocomplete"),
        {"app_label": "portal", "model_name": "rolebinding", "field_name": "user", "term": ""},
    ).json()["results"]
    assert {r["text"] for r in found} == {"admin", "operator", "viewer", "ops"}


def test_an_account_out_of_sight_cannot_be_bound_by_its_id(staff, strangers, world):
    for user in strangers.values():
        response = staff.post(
            url(RoleBinding, "add"),
            {"user": user.pk, "project": world.demo.pk, "role": builtin_role("viewer").pk},
        )
        assert response.status_code == 200  # the form again, with its error
        assert SECRET not in response.content.decode()
    assert not RoleBinding.objects.filter(user__in=strangers.values(), project=world.demo).exists()


def test_an_account_the_staff_user_adds_can_be_bound_next(staff, world):
    """Adding accounts is a platform admin's unless they grant ``auth.add_user`` by hand;
    with it, the new account (in no project yet) is the staff user's to see and bind."""
    User = get_user_model()
    staff.user.user_permissions.add(Permission.objects.get(codename="add_user"))
    response = staff.post(
        url(User, "add"),
        {"username": "newcomer", "password1": "a-long-pass-4321", "password2": "a-long-pass-4321",
         "usable_password": "true", "_continue": "1",
         "role_bindings-TOTAL_FORMS": "0", "role_bindings-INITIAL_FORMS": "0"},
        follow=True,
    )  # fmt: skip
    newcomer = User.objects.get(username="newcomer")
    assert response.status_code == 200 and response.redirect_chain[-1][0].endswith(
        url(User, "change", newcomer.pk)
    )
    assert newcomer in visible_users(staff.user)
    bound = staff.post(
        url(RoleBinding, "add"),
        {"user": newcomer.pk, "project": world.demo.pk, "role": builtin_role("viewer").pk},
    )
    assert bound.status_code == 302
    assert RoleBinding.objects.filter(user=newcomer, project=world.demo).exists()
    # Another project's staff never saw it: it is demo's account now.
    other_staff = User.objects.create_user("ops2", is_staff=True)
    RoleBinding.objects.create(user=other_staff, project=world.other, role=builtin_role("admin"))
    assert newcomer not in visible_users(other_staff)


def test_superusers_see_every_account(strangers, client, world):
    root = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(root)
    page = client.get(url(get_user_model(), "changelist")).content.decode()
    assert all(user.username in page for user in strangers.values())
    assert set(visible_users(root)) == set(get_user_model().objects.all())
