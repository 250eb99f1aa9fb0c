"""이름 변경 on the 정보 tab is the API's rename: the same operation, so the same rules and
messages, the same Operation and the same audit row, whichever surface asked."""

import pytest
from django.urls import reverse

from clusters.models import Operation
from portal.iam import tokens
from portal.models import AuditEvent

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
# What an audit row says, minus when and through which request it came.
ROW = ("action", "actor_id", "target_type", "target_name", "outcome", "code", "message")


def rename(client, cluster, name, **extra):
    return client.post(
        reverse("clusters:cluster_rename", args=[cluster.pk]), {"name": name}, **extra
    )


def api_rename(client, world, cluster, name, user="admin"):
    _token, secret = tokens.issue_token(user=world.users[user], project_id=world.demo.pk, name="t")
    return client.patch(
        f"/api/v1/virtual-clusters/{cluster.pk}",
        data={"name": name},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


def audit_row(cluster, outcome):
    event = AuditEvent.objects.filter(
        action="cluster.update", target_id=cluster.pk, outcome=outcome
    ).get()
    return {key: getattr(event, key) for key in ROW}


def test_a_console_rename_leaves_the_api_renames_operation_and_audit_row(world, login, client):
    by_page, by_api = world.cluster("page-before"), world.cluster("api-before")
    response = rename(login("admin"), by_page, "page-after", **HX)
    assert response.status_code == 200
    assert response.headers["HX-Trigger"].count("cluster-changed") == 1  # header and tab follow
    assert 'id="crumb-name" hx-swap-oob="true">page-after<' in response.content.decode()
    assert api_rename(client, world, by_api, "api-after").status_code == 200
    by_page.refresh_from_db()
    assert by_page.name == "page-after"
    page_row, api_row = audit_row(by_page, "SUCCEEDED"), audit_row(by_api, "SUCCEEDED")
    assert page_row["message"] == "page-before → page-after"
    assert {**page_row, "target_name": "", "message": ""} == {
        **api_row,
        "target_name": "",
        "message": "",
    }
    kinds = Operation.objects.filter(cluster__in=[by_page, by_api]).values_list("kind", flat=True)
    assert list(kinds) == [Operation.Kind.UPDATE, Operation.Kind.UPDATE]


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("taken", "name_taken", "이 프로젝트에 같은 이름의 클러스터가 이미 있습니다"),
        ("bad name", "name_invalid", "이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다."),
        ("", "name_required", "이름을 입력하세요."),
    ],
)
def test_a_refused_name_stays_in_the_form_with_the_apis_message(
    world, login, client, name, code, message
):
    world.cluster("taken")
    by_page, by_api = world.cluster("page-keep"), world.cluster("api-keep")
    response = rename(login("admin"), by_page, name, **HX)
    refused = api_rename(client, world, by_api, name)
    assert response.status_code == refused.status_code == 422
    problem = refused.json()
    assert problem["code"] == code
    page = response.content.decode()
    assert 'id="cluster-rename"' in page and " open" in page
    assert f'id="rename-error" role="alert">{problem["detail"]}<' in page
    assert problem["detail"] == message
    by_page.refresh_from_db()
    assert by_page.name == "page-keep"
    page_row, api_row = audit_row(by_page, "REFUSED"), audit_row(by_api, "REFUSED")
    assert {**page_row, "target_name": ""} == {**api_row, "target_name": ""}
    assert not Operation.objects.exists()


def test_who_may_not_update_gets_no_form_and_a_refusal(world, login):
    cluster = world.cluster("fixed")
    viewer = login("viewer")
    info = viewer.get(reverse("clusters:cluster_detail", args=[cluster.pk])).content.decode()
    assert 'id="cluster-rename"' not in info
    response = rename(viewer, cluster, "mine")
    assert response.status_code == 403
    assert "Resource.VirtualCluster.UPDATE" in response.content.decode()
    cluster.refresh_from_db()
    assert cluster.name == "fixed"
    assert audit_row(cluster, "REFUSED")["actor_id"] == world.users["viewer"].pk
    admin_info = login("admin").get(reverse("clusters:cluster_detail", args=[cluster.pk]))
    assert 'id="cluster-rename"' in admin_info.content.decode()


def test_without_htmx_a_rename_redirects_to_the_info_tab(world, login):
    cluster = world.cluster("plain")
    response = rename(login("admin"), cluster, "plain-2")
    assert response.status_code == 302
    assert response["Location"] == reverse("clusters:cluster_detail", args=[cluster.pk])
    cluster.refresh_from_db()
    assert cluster.name == "plain-2"
