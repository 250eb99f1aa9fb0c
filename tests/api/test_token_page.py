"""The API 토큰 page: a user creates (shown once), lists and revokes their own tokens."""

import pytest
from django.urls import reverse

from portal.iam import tokens
from portal.models import ApiToken

pytestmark = pytest.mark.django_db


def test_the_user_menu_links_the_page(login):
    page = login("viewer").get(reverse("clusters:cluster_list")).content.decode()
    assert reverse("api_tokens") in page and "API 토큰" in page


def test_anonymous_goes_to_login(client, world):
    response = client.get(reverse("api_tokens"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_create_shows_the_secret_once_then_lists_its_prefix(login, world):
    client = login("operator")
    response = client.post(reverse("api_tokens"), {"name": "pipeline", "project": world.demo.pk})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get(user=world.users["operator"])
    page = response.content.decode()
    secret = page.split("data-token>")[1].split("<")[0]
    assert tokens.hash_token(secret) == token.token_hash
    later = client.get(reverse("api_tokens")).content.decode()
    assert secret not in later
    assert token.prefix in later and "pipeline" in later and "사용 가능" in later


def test_a_project_without_a_role_is_refused_and_nothing_is_made(login, world):
    response = login("operator").post(
        reverse("api_tokens"), {"name": "x", "project": world.other.pk}
    )
    assert response.status_code == 422
    assert "역할이 있는 프로젝트만 선택할 수 있습니다." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_revoke_own_token_and_never_anothers(login, world):
    viewer = world.users["viewer"]
    mine, _secret = tokens.issue_token(user=viewer, project_id=world.demo.pk, name="a")
    theirs, _s = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="b")
    client = login("viewer")
    assert client.post(reverse("api_token_revoke", args=[theirs.pk])).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    assert client.post(reverse("api_token_revoke", args=[mine.pk])).status_code == 302
    mine.refresh_from_db()
    assert mine.revoked_at is not None
    assert "폐기됨" in client.get(reverse("api_tokens")).content.decode()
