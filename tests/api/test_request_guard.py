"""Input refused before any view reads it, and errors that are problem+json whatever
raised them: NUL characters (query, form, JSON), bodies too large or not JSON, loose types,
unknown routes and methods, unexpected exceptions."""

import json

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from clusters.models import Operation, VirtualCluster
from portal.models import ApiToken
from vms.models import VirtualMachine

pytestmark = pytest.mark.django_db
PROBLEM = "application/problem+json"


def problem(response, status, code):
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert (body["status"], body["code"]) == (status, code)
    return body


# ---------------------------------------------------------------------------------------------
# NUL


@pytest.mark.parametrize(
    "query",
    [
        "/virtual-machines?name=a%00b",
        "/virtual-machines?zone=%00",
        "/virtual-machines?instance_type=x%00",
        "/virtual-clusters?name=%00",
        "/virtual-clusters?zone=%00",
        "/virtual-clusters?instance_type=%00",
        "/virtual-clusters/{cluster}/members?name=%00",
        "/instance-types?zone=%00",
        "/operations?page_token=%00",
    ],
)
def test_a_nul_in_a_query_parameter_is_a_400_problem(api, world, secrets, query):
    cluster = world.cluster("nul")
    response = api.get(query.format(cluster=cluster.pk), token=secrets["viewer"])
    body = problem(response, 400, "nul_character")
    field = query.split("?")[1].split("=")[0]
    assert body["field"] == field
    assert body["detail"] == f"{field} 값에 쓸 수 없는 문자(NUL)가 있습니다."
    english = api.get(
        query.format(cluster=cluster.pk),
        token=secrets["viewer"],
        headers={"Accept-Language": "en"},
    )
    assert english.json()["detail"] == f"{field} contains a character that cannot be used (NUL)."


def test_a_nul_in_a_json_string_is_a_400_problem_and_changes_nothing(api, world, secrets):
    body = {
        "name": "nul\x00name",
        "zone_id": world.zone_a.pk,
        "instance_type_id": world.h100.pk,
        "fabric_type": "INFINIBAND",
    }
    response = api.post("/virtual-clusters", body, token=secrets["admin"])
    assert problem(response, 400, "nul_character")["field"] == "name"
    vm = world.vm("keep")
    renamed = api.patch(f"/virtual-machines/{vm.pk}", {"name": "x\x00"}, token=secrets["admin"])
    problem(renamed, 400, "nul_character")
    assert not VirtualCluster.objects.exists() and not Operation.objects.exists()
    vm.refresh_from_db()
    assert vm.name == "keep"


def test_the_token_page_shows_a_nul_in_the_name_as_its_forms_error(login, world):
    client = login("operator")
    response = client.post(reverse("api_tokens"), {"name": "a\x00b", "project": world.demo.pk})
    assert response.status_code == 400
    page = response.content.decode()
    assert "name 값에 쓸 수 없는 문자(NUL)가 있습니다." in page
    assert 'id="token-name"' in page  # the form, with its error, not an error page
    assert not ApiToken.objects.exists()


def test_a_console_list_ignores_a_nul_filter_and_says_so(login, world):
    world.vm("shown-vm")
    client = login("viewer")
    for url in (reverse("vms:vm_list"), reverse("clusters:cluster_list")):
        response = client.get(url, {"name": "a\x00", "zone": "\x00"})
        assert response.status_code == 200, url
        assert "주소의 name 값에 쓸 수 없는 문자(NUL)가 있어 무시했습니다." in (
            response.content.decode()
        )
    assert "shown-vm" in client.get(reverse("vms:vm_list"), {"name": "\x00"}).content.decode()


def test_a_console_form_with_a_nul_is_refused_with_a_message(login, world):
    vm = world.vm("kept-name")
    client = login("admin")
    response = client.post(
        reverse("vms:vm_edit", args=[vm.pk]), {"name": "x\x00y"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert "name 값에 쓸 수 없는 문자(NUL)가 있습니다." in response.content.decode()
    vm.refresh_from_db()
    assert vm.name == "kept-name"


# ---------------------------------------------------------------------------------------------
# Bodies: size and type


@pytest.mark.parametrize("debug", [True, False])
def test_a_body_too_large_is_a_413_problem(api, world, secrets, debug):
    body = {"vm_ids": [1], "pad": "x" * (3 * 1024 * 1024)}
    cluster = world.cluster("big")
    with override_settings(DEBUG=debug):
        response = api.post(f"/virtual-clusters/{cluster.pk}/members", body, token=secrets["admin"])
    body = problem(response, 413, "body_too_large")
    assert "2621440" in body["detail"]


def test_a_chunked_body_without_a_length_is_a_411_and_changes_nothing(api, world, secrets):
    """A chunked request reaches Django as gunicorn and wsgiref hand it over: a
    Transfer-Encoding header and no CONTENT_LENGTH, so the view would read an empty body."""
    cluster = world.cluster("chunked")
    vm = world.vm("chunked-vm", cluster=None)
    response = api.client.post(
        f"/api/v1/virtual-clusters/{cluster.pk}/members",
        data=json.dumps({"vm_ids": [vm.pk]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secrets['admin']}"},
        HTTP_TRANSFER_ENCODING="chunked",
        CONTENT_LENGTH="",
    )
    problem(response, 411, "length_required")
    vm.refresh_from_db()
    assert vm.cluster_id is None and not Operation.objects.exists()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_json_body_needs_application_json(api, world, secrets, content_type):
    payload = {
        "name": "plain",
        "zone_id": world.zone_a.pk,
        "instance_type_id": world.h100.pk,
        "fabric_type": "INFINIBAND",
    }
    response = api.client.post(
        "/api/v1/virtual-clusters",
        data=json.dumps(payload),
        content_type=content_type,
        headers={"Authorization": f"Bearer {secrets['admin']}"},
    )
    problem(response, 415, "json_required")
    assert not VirtualCluster.objects.exists()


# ---------------------------------------------------------------------------------------------
# Strict types


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/virtual-clusters", {"zone_id": True}, "zone_id"),
        ("/virtual-clusters", {"instance_type_id": "1"}, "instance_type_id"),
        ("/virtual-machines", {"count": True}, "count"),
        ("/virtual-machines", {"disaster_recovery": "yes"}, "disaster_recovery"),
        ("/virtual-machines", {"disaster_recovery": 1}, "disaster_recovery"),
        ("/virtual-clusters/{cluster}:stop", {"stop_members": "yes"}, "stop_members"),
        ("/virtual-clusters/{cluster}/members", {"vm_ids": [True]}, "vm_ids"),
        ("/virtual-clusters/{cluster}/members", {"vm_ids": [1.0]}, "vm_ids"),
    ],
)
def test_loose_types_are_refused(api, world, secrets, path, body, field):
    cluster = world.cluster("strict")
    world.vm("one")  # id 1 may exist: `true` must never name it
    base = {
        "/virtual-clusters": {
            "name": "s",
            "zone_id": world.zone_a.pk,
            "instance_type_id": world.h100.pk,
            "fabric_type": "INFINIBAND",
        },
        "/virtual-machines": {
            "name": "s",
            "zone_id": world.zone_a.pk,
            "instance_type_id": world.h100.pk,
            "billing_type": "ON_DEMAND",
        },
    }.get(path, {})
    response = api.post(path.format(cluster=cluster.pk), {**base, **body}, token=secrets["admin"])
    assert problem(response, 422, "request_invalid")["field"] == field
    assert not Operation.objects.exists()
    assert VirtualMachine.objects.count() == 1 and VirtualCluster.objects.count() == 1


# ---------------------------------------------------------------------------------------------
# Every error is problem+json


def test_unknown_routes_and_methods_are_problems(api, world, secrets):
    problem(api.get("/no-such-thing", token=secrets["viewer"], check=False), 404, "not_found")
    response = api.request("PUT", "/virtual-clusters", token=secrets["viewer"], check=False)
    body = problem(response, 405, "method_not_allowed")
    assert body["detail"] == "이 경로는 PUT 요청을 받지 않습니다."
    assert "GET" in response["Allow"]


@pytest.mark.parametrize("debug", [True, False])
def test_an_unexpected_exception_is_a_500_problem_without_traceback(
    world, secrets, monkeypatch, debug
):
    def broken(*args, **kwargs):
        raise RuntimeError("internal detail")

    monkeypatch.setattr("portal.api.clusters.filtered", broken)
    client = Client(raise_request_exception=False)
    with override_settings(DEBUG=debug):
        response = client.get(
            "/api/v1/virtual-clusters", headers={"Authorization": f"Bearer {secrets['viewer']}"}
        )
    body = problem(response, 500, "server_error")
    assert response["X-Request-ID"] in body["detail"]
    assert b"internal detail" not in response.content and b"Traceback" not in response.content


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/virtual-clusters?page_size=1.0", "page_size"),
        ("/virtual-clusters?page_size=+5", "page_size"),
        ("/virtual-clusters?page_size=1_0", "page_size"),
        ("/virtual-machines?cluster=true", "cluster"),
        ("/virtual-machines?cluster=%201", "cluster"),
        ("/operations?cluster=1.0", "cluster"),
        ("/virtual-clusters/{cluster}/validations?include_raw=yes", "include_raw"),
        ("/virtual-clusters/{cluster}/validations?include_raw=1", "include_raw"),
    ],
)
def test_loose_query_values_are_refused(api, world, secrets, path, field):
    cluster = world.cluster("strict")
    response = api.get(path.format(cluster=cluster.pk), token=secrets["admin"])
    assert problem(response, 422, "request_invalid")["field"] == field
    exact = path.split("?")[0].format(cluster=cluster.pk)
    assert api.get(f"{exact}?page_size=5", token=secrets["admin"]).status_code == 200
