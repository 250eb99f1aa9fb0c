"""A login lockout lasts its whole window whatever else is going on: its state is not in a
cache that traffic can evict (here, the cache is simply emptied, the most any eviction can
do), and the API tokens that used to flush it are capped per user."""

import pytest
from django.conf import settings
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import translation

from portal.foundation.errors.api import TokenLimitReached
from portal.iam import tokens
from portal.models import ApiToken
from tests.conftest import PASSWORD

LOCMEM = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def lock(client, username):
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        client.post(reverse("login"), {"username": username, "password": "wrong"})


@override_settings(CACHES=LOCMEM)
def test_a_lockout_survives_the_cache_losing_everything(scene, client):
    lock(client, "viewer")
    cache.clear()
    response = client.post(
        reverse("login"), {"username": "viewer", "password": PASSWORD}, REMOTE_ADDR="10.9.8.7"
    )
    assert response.status_code == 429


@override_settings(CACHES=LOCMEM)
def test_a_lockout_survives_a_flood_of_api_requests_with_many_tokens(scene, client):
    """The attack as found: one API request with each of many tokens of one's own."""
    lock(client, "viewer")
    attacker = scene.world.admin
    project = tokens.token_projects(attacker).first()
    issued = []
    for number in range(ApiToken.MAX_ACTIVE_PER_USER):
        issued.append(tokens.issue_token(user=attacker, project_id=project.pk, name=f"t{number}"))
    for _rounds in range(7):  # as many keys as 350 tokens would make
        for _token, secret in issued:
            client.get("/api/v1/zones", headers={"Authorization": f"Bearer {secret}"})
        cache.set_many({f"filler-{_rounds}-{n}": n for n in range(50)})
    response = client.post(
        reverse("login"), {"username": "viewer", "password": PASSWORD}, REMOTE_ADDR="10.9.8.7"
    )
    assert response.status_code == 429


@pytest.fixture
def holder(db):
    from django.contrib.auth import get_user_model

    from portal.models import Project, Role, RoleBinding

    user = get_user_model().objects.create_user("holder", password=PASSWORD)
    project = Project.objects.create(slug="p", name="p")
    RoleBinding.objects.create(user=user, project=project, role=Role.objects.get(name="viewer"))
    for number in range(ApiToken.MAX_ACTIVE_PER_USER):
        tokens.issue_token(user=user, project_id=project.pk, name=f"t{number}")
    return user, project


def test_the_fifty_first_active_token_is_refused(holder):
    user, project = holder
    with pytest.raises(TokenLimitReached) as refused:
        tokens.issue_token(user=user, project_id=project.pk, name="one more")
    assert "50개까지" in refused.value.message
    assert ApiToken.objects.filter(user=user).count() == ApiToken.MAX_ACTIVE_PER_USER
    tokens.revoke_token(ApiToken.objects.filter(user=user).first().pk, user=user)
    tokens.issue_token(user=user, project_id=project.pk, name="one more")  # room again


def test_the_token_page_and_the_command_say_why(holder, client):
    user, project = holder
    client.force_login(user)
    page = client.post(reverse("api_tokens"), {"project": project.pk, "name": "x", "days": 30})
    assert page.status_code == 422
    assert "사용 가능한 API 토큰은 사용자마다 50개까지입니다" in page.content.decode()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    english = client.post(reverse("api_tokens"), {"project": project.pk, "name": "x", "days": 30})
    assert "at most 50 active API tokens" in english.content.decode()
    with translation.override("ko"), pytest.raises(CommandError, match="50개까지"):
        call_command("create_api_token", user="holder", project="p")
    assert ApiToken.objects.filter(user=user).count() == ApiToken.MAX_ACTIVE_PER_USER
