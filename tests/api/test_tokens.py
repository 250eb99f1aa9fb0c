"""Personal access tokens: issued once and hashed, acting with exactly the user's current
role in one project, refused with a 401 that says why the moment they stop being valid."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from portal.foundation.errors import InvalidInput
from portal.iam import tokens
from portal.models import ApiToken, AuditEvent, Role, RoleBinding
from tests.conftest import builtin_role

pytestmark = pytest.mark.django_db


def test_issued_once_stored_hashed_with_a_90_day_default(world):
    token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="ci")
    assert secret.startswith("vcp_") and len(secret) > 40
    assert token.token_hash == tokens.hash_token(secret) != secret
    assert not ApiToken.objects.filter(token_hash=secret).exists()
    assert token.prefix == secret[:12]
    assert abs(token.expires_at - (timezone.now() + timedelta(days=90))) < timedelta(minutes=1)
    assert AuditEvent.objects.filter(action="token.create", actor=world.admin).exists()


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"name": ""}, "token_name_required"),
        ({"name": "x" * 101}, "token_name_required"),
        ({"days": 0}, "token_days_invalid"),
        ({"days": 366}, "token_days_invalid"),
        ({"days": "many"}, "token_days_invalid"),
        ({"project": "other"}, "token_project_invalid"),
        ({"project": "nope"}, "token_project_invalid"),
    ],
)
def test_invalid_requests_issue_nothing(world, kwargs, code):
    project = {"other": world.other.pk, "nope": "x"}.get(kwargs.pop("project", None), world.demo.pk)
    with pytest.raises(InvalidInput) as refused:
        tokens.issue_token(user=world.admin, project_id=project, **{"name": "ci", **kwargs})
    assert refused.value.code == code
    assert not ApiToken.objects.exists()


def test_the_command_prints_a_working_token(world, api, capsys):
    call_command("create_api_token", "--user", "viewer", "--project", "demo", "--days", "7")
    secret = capsys.readouterr().out.strip()
    assert api.get("/zones", token=secret).status_code == 200
    token = ApiToken.objects.get(token_hash=tokens.hash_token(secret))
    assert token.expires_at - timezone.now() < timedelta(days=7, minutes=1)


def _detail(response):
    return response.json()["detail"]


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "token_required"),
        ("Basic dXNlcjpwYXNz", "token_required"),
        ("Bearer ", "token_required"),
        ("Bearer vcm_metrics_token_not_an_api_one", "token_invalid"),
        ("Bearer vcp_" + "x" * 43, "token_invalid"),
        ("Bearer vcp_" + "x" * 200, "token_invalid"),
    ],
)
def test_missing_or_bad_tokens_are_401(api, world, authorization, code):
    headers = {"Authorization": authorization} if authorization else {}
    response = api.get("/virtual-clusters", headers=headers)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == code


def test_expired_revoked_and_role_gone_stop_at_once(api, world, secrets):
    viewer = secrets["viewer"]
    assert api.get("/virtual-clusters", token=viewer).status_code == 200
    token = ApiToken.objects.get(token_hash=tokens.hash_token(viewer))

    RoleBinding.objects.filter(user=world.users["viewer"]).delete()
    response = api.get("/virtual-clusters", token=viewer)
    assert (response.status_code, response.json()["code"]) == (401, "token_role_gone")
    RoleBinding.objects.create(
        user=world.users["viewer"], project=world.demo, role=builtin_role("viewer")
    )

    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api.get("/virtual-clusters", token=viewer).json()["code"] == "token_expired"
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() + timedelta(days=1))

    tokens.revoke_token(token.pk, user=world.users["viewer"])
    response = api.get("/virtual-clusters", token=viewer)
    assert (response.status_code, response.json()["code"]) == (401, "token_revoked")

    world.users["operator"].is_active = False
    world.users["operator"].save()
    assert api.get("/zones", token=secrets["operator"]).json()["code"] == "token_invalid"


def test_messages_are_korean_by_default_and_english_when_asked(api, world):
    korean = api.get("/virtual-clusters", headers={"Authorization": "Bearer vcp_nope"})
    assert _detail(korean) == "유효하지 않은 API 토큰입니다."
    assert korean["Content-Language"] == "ko"
    english = api.get(
        "/virtual-clusters",
        headers={"Authorization": "Bearer vcp_nope", "Accept-Language": "en-US,en;q=0.9"},
    )
    assert _detail(english) == "Invalid API token."
    assert english["Content-Language"] == "en"
    # The console's language cookie does not choose the API's language.
    api.client.cookies["portal_language"] = "en"
    assert _detail(api.get("/virtual-clusters", headers={"Authorization": "Bearer vcp_n"})) == (
        "유효하지 않은 API 토큰입니다."
    )


def test_a_session_cookie_authenticates_nothing(api, world):
    api.client.force_login(world.admin)
    assert api.get("/virtual-clusters").status_code == 401


def test_the_token_sees_its_project_only_with_the_role_held_there(api, world, django_user_model):
    """A user with roles in two projects, and a superuser: the token is one project and one
    role, never the superuser bypass."""
    mine, theirs = world.cluster("mine"), world.cluster("theirs", project=world.other)
    both = django_user_model.objects.create_superuser("both", password="x")
    RoleBinding.objects.create(user=both, project=world.demo, role=builtin_role("viewer"))
    RoleBinding.objects.create(user=both, project=world.other, role=builtin_role("admin"))
    _token, secret = tokens.issue_token(user=both, project_id=world.demo.pk, name="t")
    names = [c["name"] for c in api.get("/virtual-clusters", token=secret).json()["items"]]
    assert names == ["mine"]
    assert api.get(f"/virtual-clusters/{theirs.pk}", token=secret).status_code == 404
    assert api.get(f"/virtual-clusters/{mine.pk}", token=secret).status_code == 200


def test_the_role_is_read_on_every_request(api, world, secrets):
    """A role whose permissions shrink shrinks the token at once."""
    world.cluster("seen")
    role = Role.objects.create(name="custom", permissions=["Resource.VirtualCluster.READ"])
    RoleBinding.objects.filter(user=world.users["operator"]).update(role=role)
    assert api.get("/virtual-clusters", token=secrets["operator"]).json()["items"]
    role.permissions = ["Resource.VirtualMachine.READ"]
    role.save()
    assert api.get("/virtual-clusters", token=secrets["operator"]).json()["items"] == []


def test_last_use_is_recorded(api, world, secrets):
    token = ApiToken.objects.get(token_hash=tokens.hash_token(secrets["viewer"]))
    assert token.last_used_at is None
    api.get("/zones", token=secrets["viewer"])
    token.refresh_from_db()
    assert timezone.now() - token.last_used_at < timedelta(seconds=5)


def test_too_many_requests_is_429_with_retry_after(api, world, secrets, settings):
    from django.core.cache import cache

    cache.clear()
    settings.API_RATE_PER_MINUTE = 3
    answers = [api.get("/zones", token=secrets["viewer"]) for _ in range(4)]
    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["code"] == "rate_limited"
    assert 1 <= int(answers[-1]["Retry-After"]) <= 60
    cache.clear()
