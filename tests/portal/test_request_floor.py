"""What every console request costs before its page: the session and the user, whose row
brings their roles and projects (``portal.iam.auth.SessionUserBackend``) — two queries. Nothing
keeps a grant between requests, so a grant taken away is gone on the very next request,
whichever way it was taken: the admin, a queryset ``update()`` that sends no signal, SQL by
hand, a deleted project, a deactivated user."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from clusters.models import VirtualCluster
from portal.iam.permissions import READ_PERMISSIONS
from portal.models import Project, Role, RoleBinding
from tests.conftest import PASSWORD, builtin_role

FLOOR = "/__bench__/floor/"  # tests.bench.urls: login_required, answers "ok"
# The roles and projects come with the user's row by json_agg(… ORDER BY), which the demo's
# SQLite lacks: there they are read when first asked (portal.iam.auth.SessionUserBackend).
WITH_THE_USER = pytest.mark.postgres_only("the user's grants come with their row by json_agg")
CREATE_FORM = {"name": "fresh", "fabric_type": "INFINIBAND"}


@pytest.fixture
def bench_urls(settings):
    settings.ROOT_URLCONF = "tests.bench.urls"


@pytest.fixture
def root(world):
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password=PASSWORD))
    return client


def captured(client, url):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    return response, [q["sql"] for q in queries]


def admin_url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@WITH_THE_USER
def test_the_floor_is_two_queries_the_session_and_the_user(world, login, bench_urls):
    response, queries = captured(login("admin"), FLOOR)
    assert response.status_code == 200 and response.content == b"ok"
    assert len(queries) == 2
    assert '"django_session"' in queries[0] and '"auth_user"' in queries[1]


@WITH_THE_USER
def test_a_superuser_floor_is_two_queries_too(world, root, bench_urls):
    response, queries = captured(root, FLOOR)
    assert response.status_code == 200 and len(queries) == 2


@WITH_THE_USER
def test_a_page_reads_no_role_and_no_project_beside_the_user(world, login):
    """The switcher, the current project and restrict() all answer from the user's row."""
    world.cluster("visible")
    response, queries = captured(login("admin"), "/clusters/")
    page = response.content.decode()
    assert "visible" in page and f'<option value="{world.demo.pk}" selected>demo' in page
    apart = [sql for sql in queries if '"auth_user"' not in sql]
    assert not [sql for sql in apart if 'FROM "portal_rolebinding"' in sql]
    assert not [sql for sql in apart if 'FROM "portal_project"' in sql]


def test_the_switcher_lists_the_projects_in_name_order_and_a_superuser_sees_all(world, root):
    second = Project.objects.create(slug="aaa", name="aaa")
    RoleBinding.objects.create(user=world.admin, project=second, role=builtin_role("viewer"))
    client = Client()
    client.force_login(world.admin)
    page = client.get("/clusters/").content.decode()
    assert page.index(">aaa</option>") < page.index(">demo</option>") and ">other<" not in page
    page = root.get("/clusters/").content.decode()
    assert all(f">{name}</option>" in page for name in ("aaa", "demo", "other"))


def test_a_binding_deleted_in_the_admin_refuses_the_very_next_request(world, login, root):
    cluster = world.cluster()
    client = login("viewer")
    assert client.get(f"/clusters/{cluster.pk}/").status_code == 200
    binding = RoleBinding.objects.get(user=world.users["viewer"])
    response = root.post(admin_url(RoleBinding, "delete", binding.pk), {"post": "yes"})
    assert response.status_code == 302 and not RoleBinding.objects.filter(pk=binding.pk).exists()
    assert client.get(f"/clusters/{cluster.pk}/").status_code == 404
    page = client.get("/clusters/").content.decode()
    assert "접근할 수 있는 프로젝트가 없습니다" in page


def _role_form_in_the_admin(root, role, permissions):
    response = root.post(
        admin_url(Role, "change", role.pk),
        {"name": role.name, "description": role.description, "permissions": permissions},
    )
    assert response.status_code == 302


def _role_by_queryset_update(root, role, permissions):
    Role.objects.filter(pk=role.pk).update(permissions=permissions)  # no signal is sent


def _role_by_sql(root, role, permissions):
    import json

    cast = "::jsonb" if connection.vendor == "postgresql" else ""  # SQLite's JSON is text

    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Role._meta.db_table} SET permissions = %s{cast} WHERE id = %s",
            [json.dumps(permissions), role.pk],
        )


@pytest.mark.parametrize(
    "change", [_role_form_in_the_admin, _role_by_queryset_update, _role_by_sql]
)
def test_a_role_losing_a_permission_refuses_the_very_next_request(world, login, root, change):
    client = login("admin")
    assert client.get("/clusters/new/").status_code == 200
    change(root, Role.objects.get(name="admin"), sorted(READ_PERMISSIONS))
    assert client.get("/clusters/new/").status_code == 403
    form = {**CREATE_FORM, "zone": world.zone_a.pk, "instance_type": world.h100.pk}
    assert client.post("/clusters/new/", form).status_code == 403
    assert not VirtualCluster.objects.exists()


def test_a_binding_moved_to_a_lesser_role_by_update_refuses_the_next_request(world, login):
    client = login("admin")
    assert client.get("/clusters/new/").status_code == 200
    RoleBinding.objects.filter(user=world.admin).update(role=builtin_role("viewer"))
    assert client.get("/clusters/new/").status_code == 403


def test_a_grant_given_is_there_on_the_next_request(world, login):
    cluster = world.cluster("theirs", project=world.other)
    client = login("viewer")
    assert client.get(f"/clusters/{cluster.pk}/").status_code == 404
    RoleBinding.objects.create(
        user=world.users["viewer"], project=world.other, role=builtin_role("viewer")
    )
    assert client.get(f"/clusters/{cluster.pk}/").status_code == 200


def test_a_deleted_project_leaves_the_switcher_and_the_current_project(world, login):
    second = Project.objects.create(slug="second", name="second")
    RoleBinding.objects.create(user=world.admin, project=second, role=builtin_role("admin"))
    client = login("admin")
    client.post("/project/", {"project": second.pk})
    assert client.session["project_id"] == second.pk
    assert f'<option value="{second.pk}" selected>' in client.get("/clusters/").content.decode()
    Project.objects.filter(pk=second.pk).delete()  # its bindings go with it
    page = client.get("/clusters/").content.decode()
    assert ">second</option>" not in page
    assert f'<option value="{world.demo.pk}" selected>demo' in page


def test_a_renamed_project_shows_its_new_name_on_the_next_request(world, login):
    client = login("admin")
    assert ">demo</option>" in client.get("/clusters/").content.decode()
    Project.objects.filter(pk=world.demo.pk).update(name="renamed")
    assert ">renamed</option>" in client.get("/clusters/").content.decode()


def test_a_deactivated_user_is_logged_out_on_the_next_request(world, login):
    client = login("admin")
    assert client.get("/clusters/").status_code == 200
    get_user_model().objects.filter(pk=world.admin.pk).update(is_active=False)
    response = client.get("/clusters/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
