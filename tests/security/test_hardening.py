"""Production hardening: ``check --deploy``, CSP with nonces, security headers, secure
cookies, session rotation, login throttling, ``/healthz``, request ids."""

import json
import logging
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import DatabaseError
from django.test import Client, override_settings
from django.urls import reverse

from portal.foundation.request_ids import RequestIdFilter
from portal.models import AuditEvent
from tests.child import run_python
from tests.conftest import PASSWORD

BASE_DIR = Path(settings.BASE_DIR)
THROTTLED = "로그인 시도가 너무 많습니다. 잠시 후 다시 시도하세요."


def production_env(**extra):
    """A deployment's environment: nothing of the test run's (eager tasks, async-unsafe...)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "DATABASE_URL")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(
        PORTAL_MODE="production",
        SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_SETTINGS_MODULE="portal.settings",
        ALLOWED_HOSTS="testserver,127.0.0.1",
        PYTHONPATH=str(BASE_DIR),
    )
    env.update(extra)
    return env


@pytest.mark.slow
def test_check_deploy_is_clean_in_production():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=production_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    env = production_env()
    env.pop("SECRET_KEY")
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


PRODUCTION_PROBE = r"""
import json, re, django
django.setup()
from django.test import Client
c = Client()
out = {}
r = c.get("/login/")
out["plain_http"] = [r.status_code, r.get("Location", "")]
r = c.get("/login/", secure=True)
out["headers"] = dict(r.headers)
token = r.cookies["__Host-csrftoken"].value
FLAGS = ("secure", "httponly", "samesite", "path", "domain")
out["csrf_cookie"] = {k: r.cookies["__Host-csrftoken"][k] for k in FLAGS}
c = Client(enforce_csrf_checks=True)
c.cookies["__Host-csrftoken"] = token
r = c.post("/login/", {"username": "prod-user", "password": "%(password)s",
           "csrfmiddlewaretoken": token}, secure=True, HTTP_REFERER="https://testserver/login/")
out["login"] = [r.status_code, r.get("Location", "")]
out["login_errors"] = re.findall(r'role="alert">([^<]*)<', r.content.decode())
m = r.cookies.get("__Host-sessionid")
out["session_cookie"] = {k: m[k] for k in FLAGS} if m else None
print("PROBE" + json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_production_cookies_and_headers(django_user_model, tmp_path):
    """A real login in production mode (a subprocess on the test database)."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    # The test run hashes with a fast hasher production does not accept: use production's.
    hasher = PBKDF2PasswordHasher()
    django_user_model.objects.create(
        username="prod-user", password=hasher.encode(PASSWORD, hasher.salt())
    )
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        pytest.skip("needs the PostgreSQL test database to share the user with a subprocess")
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    env = production_env(DATABASE_URL=url, CACHE_URL="", STATIC_ROOT=str(tmp_path / "static"))
    # Production serves hashed static names from the manifest collectstatic writes.
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
        timeout=120,
    )
    result = run_python(PRODUCTION_PROBE % {"password": PASSWORD}, env, timeout=60)
    out = json.loads(result.stdout.split("PROBE", 1)[1])
    # Plain http is sent to https.
    assert out["plain_http"] == [301, "https://testserver/login/"]
    headers = out["headers"]
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "'nonce-" in headers["Content-Security-Policy"]
    assert out["csrf_cookie"]["secure"] is True and out["csrf_cookie"]["httponly"] is True
    assert out["csrf_cookie"]["path"] == "/" and not out["csrf_cookie"]["domain"]
    assert out["login"] == [302, "/clusters/"], out["login_errors"]
    session = out["session_cookie"]
    assert session and session["secure"] is True and session["httponly"] is True
    assert session["samesite"] == "Lax" and session["path"] == "/" and not session["domain"]


# ---------------------------------------------------------------------------------------------
# CSP: a nonce on every script of ours, nothing inline without it


SCRIPT_TAG = re.compile(r"<script\b[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"<[^>]+\s(on[a-z]+)\s*=", re.I)


def _pages(scene):
    return [
        reverse("clusters:cluster_list"),
        reverse("clusters:cluster_create"),
        reverse("clusters:cluster_detail", args=[scene.running.pk]),
        reverse("clusters:cluster_members", args=[scene.running.pk]),
        reverse("clusters:cluster_activity", args=[scene.running.pk]),
        reverse("vms:vm_list"),
        reverse("vms:vm_create"),
        reverse("vms:vm_edit", args=[scene.vm.pk]),
    ]


def test_csp_nonce_on_every_script_and_no_inline_handlers(scene, client):
    pages = [reverse("login")]
    client.force_login(scene.world.admin)
    pages += _pages(scene)
    for url in pages:
        if url == reverse("login"):
            response = Client().get(url)
        else:
            response = client.get(url)
        assert response.status_code == 200, url
        csp = response["Content-Security-Policy"]
        nonce = re.search(r"'nonce-([^']+)'", csp).group(1)
        assert "script-src 'self' 'nonce-" in csp
        assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";", 1)[0]
        assert "'unsafe-eval'" not in csp
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
        body = response.content.decode()
        tags = SCRIPT_TAG.findall(body)
        assert tags, url
        for tag in tags:
            assert f'nonce="{nonce}"' in tag, (url, tag)
        assert not INLINE_HANDLER.findall(body), (url, INLINE_HANDLER.findall(body))


def test_nonce_differs_per_response(client):
    first = client.get(reverse("login"))["Content-Security-Policy"]
    second = client.get(reverse("login"))["Content-Security-Policy"]
    assert first != second


def test_security_headers_on_every_page_and_fragment(scene, client):
    client.force_login(scene.world.admin)
    for url in _pages(scene) + [reverse("clusters:cluster_header", args=[scene.running.pk])]:
        response = client.get(url, HTTP_HX_REQUEST="true")
        assert response["X-Frame-Options"] == "DENY", url
        assert response["X-Content-Type-Options"] == "nosniff", url
        assert response["Referrer-Policy"] == "same-origin", url
        assert "Content-Security-Policy" in response, url


# ---------------------------------------------------------------------------------------------
# Sessions


def test_session_key_rotates_at_login_and_the_old_one_dies(scene, client):
    store = SessionStore()
    store["seen"] = True
    store.create()
    old_key = store.session_key
    client.cookies[settings.SESSION_COOKIE_NAME] = old_key
    response = client.post(reverse("login"), {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 302
    new_key = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert new_key != old_key
    assert not SessionStore().exists(old_key)
    assert SessionStore(session_key=new_key).load()[SESSION_KEY] == str(
        scene.world.users["viewer"].pk
    )


def test_logout_ends_the_session(scene, client):
    client.post(reverse("login"), {"username": "viewer", "password": PASSWORD})
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    client.post(reverse("logout"))
    assert not SessionStore().exists(key)
    assert client.get(reverse("clusters:cluster_list")).status_code == 302


# ---------------------------------------------------------------------------------------------
# Login throttling


def _fail(client, username, **extra):
    return client.post(reverse("login"), {"username": username, "password": "wrong"}, **extra)


def test_throttled_per_username_even_with_the_right_password(scene, client):
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        response = _fail(client, "viewer")
        assert response.status_code == 200
        assert THROTTLED not in response.content.decode()
    response = client.post(reverse("login"), {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 429
    assert THROTTLED in response.content.decode()
    assert int(response["Retry-After"]) > 0
    assert SESSION_KEY not in client.session
    # Another user from the same address is not locked out by viewer's counter.
    response = client.post(reverse("login"), {"username": "operator", "password": PASSWORD})
    assert response.status_code == 302


def test_throttle_message_follows_the_language(scene, client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        _fail(client, "viewer")
    response = client.post(reverse("login"), {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 429
    assert "Too many login attempts" in response.content.decode()


def test_throttle_key_ignores_case_and_spaces(scene, client):
    for variant in ["viewer", "VIEWER", " Viewer", "viewer ", "vIeWeR"]:
        _fail(client, variant)
    response = client.post(reverse("login"), {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 429


def test_throttled_per_address_across_usernames(scene, client):
    for attempt in range(settings.LOGIN_THROTTLE_PER_ADDRESS):
        _fail(client, f"nobody-{attempt}")
    response = client.post(reverse("login"), {"username": "admin", "password": PASSWORD})
    assert response.status_code == 429
    assert THROTTLED in response.content.decode()
    # A different client address may still log in.
    response = client.post(
        reverse("login"), {"username": "admin", "password": PASSWORD}, REMOTE_ADDR="10.9.8.7"
    )
    assert response.status_code == 302


def test_forwarded_for_is_not_trusted_by_default(scene, client):
    for attempt in range(settings.LOGIN_THROTTLE_PER_ADDRESS):
        _fail(client, f"nobody-{attempt}", HTTP_X_FORWARDED_FOR=f"10.0.0.{attempt}")
    response = client.post(
        reverse("login"),
        {"username": "admin", "password": PASSWORD},
        HTTP_X_FORWARDED_FOR="10.1.1.1",
    )
    assert response.status_code == 429


@override_settings(TRUSTED_PROXY_COUNT=1)
def test_behind_a_trusted_proxy_the_forwarded_address_counts(scene, client):
    for attempt in range(settings.LOGIN_THROTTLE_PER_ADDRESS):
        _fail(client, f"nobody-{attempt}", HTTP_X_FORWARDED_FOR="spoofed, 203.0.113.9")
    blocked = client.post(
        reverse("login"),
        {"username": "admin", "password": PASSWORD},
        HTTP_X_FORWARDED_FOR="203.0.113.9",
    )
    assert blocked.status_code == 429
    other = client.post(
        reverse("login"),
        {"username": "admin", "password": PASSWORD},
        HTTP_X_FORWARDED_FOR="198.51.100.7",
    )
    assert other.status_code == 302


def test_success_clears_the_username_counter(scene, client):
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER - 1):
        _fail(client, "viewer")
    assert (
        client.post(reverse("login"), {"username": "viewer", "password": PASSWORD}).status_code
        == 302
    )
    client.post(reverse("logout"))
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER - 1):
        _fail(client, "viewer")
    assert (
        client.post(reverse("login"), {"username": "viewer", "password": PASSWORD}).status_code
        == 302
    )


def test_throttle_expires_after_its_window(scene, client, monkeypatch):
    """The limiter's clock is moved, not waited for: locked a second before the window
    ends, open at its end."""
    from portal.iam import throttle

    start = time.time()
    monkeypatch.setattr(throttle, "now", lambda: start)
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        _fail(client, "viewer")
    login = {"username": "viewer", "password": PASSWORD}
    monkeypatch.setattr(throttle, "now", lambda: start + throttle.window_seconds() - 1)
    assert client.post(reverse("login"), login).status_code == 429
    monkeypatch.setattr(throttle, "now", lambda: start + throttle.window_seconds())
    assert client.post(reverse("login"), login).status_code == 302


@override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
def test_throttle_survives_a_flood_of_ingest_requests_with_random_tokens(scene, client):
    """The default cache (local memory) keeps 300 entries: the ingest limit must not spend one
    per unverified token, or a flood of made-up tokens evicts the login counters."""
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        _fail(client, "viewer")
    assert _fail(client, "viewer").status_code == 429
    batch = {
        "samples": [
            {"ts": time.time(), "cpu_util": 1.0, "mem_util": 1.0, "net_rx": 0.0, "net_tx": 0.0}
        ]
    }
    for _request in range(400):
        response = client.post(
            reverse("metrics:ingest"),
            batch,
            content_type="application/json",
            headers={"Authorization": f"Bearer vcm_{secrets.token_hex(16)}"},
        )
        assert response.status_code == 401
    response = client.post(reverse("login"), {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 429


@pytest.mark.slow
@override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
def test_a_throttled_client_cannot_flush_the_counters_with_made_up_usernames(scene, client):
    """An attempt refused while throttled counts nothing: the admin's login form reaches the
    backend even then, and a counter per made-up username would evict viewer's."""
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        _fail(client, "viewer")
    attacker = {"REMOTE_ADDR": "203.0.113.50"}
    for attempt in range(400):
        client.post("/admin/login/", {"username": f"u{attempt}", "password": "x"}, **attacker)
    response = client.post(
        reverse("login"), {"username": "viewer", "password": PASSWORD}, REMOTE_ADDR="10.9.8.7"
    )
    assert response.status_code == 429


def test_admin_login_is_throttled_too(scene, client, django_user_model):
    """The admin's login page goes through the same backend: no side door for guessing."""
    django_user_model.objects.create_user("staffer", password=PASSWORD, is_staff=True)
    for _attempt in range(settings.LOGIN_THROTTLE_PER_USER):
        client.post("/admin/login/", {"username": "staffer", "password": "wrong"})
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "staffer", "password": PASSWORD}
    )
    assert response.status_code == 200  # the admin form re-rendered, not logged in
    assert SESSION_KEY not in client.session


# ---------------------------------------------------------------------------------------------
# /healthz


def test_healthz_reports_database_and_broker(client, db):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok", "cache": "ok"}
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


def test_healthz_fails_when_the_broker_is_down(client, db, monkeypatch):
    from portal.celery import app

    dead = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    saved = app.conf["broker_url"]  # the configured value (the property prefers the env)
    # Celery reads CELERY_BROKER_URL from the environment before its configuration.
    for key in ("CELERY_BROKER_READ_URL", "CELERY_BROKER_WRITE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CELERY_BROKER_URL", dead)
    app.conf.broker_url = dead
    try:
        response = client.get(reverse("healthz"))
    finally:
        app.conf.broker_url = saved
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "error" and body["database"] == "ok"
    assert body["broker"].startswith("error")


def test_healthz_fails_when_the_database_is_down(client, db, monkeypatch):
    from portal.web import views

    class DeadConnection:
        def cursor(self):
            raise DatabaseError("connection refused")

    monkeypatch.setattr(views, "connection", DeadConnection())
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json()["database"] == "error: DatabaseError"


# ---------------------------------------------------------------------------------------------
# Request ids: on the response, in the audit event and in the structured log line


def test_request_id_is_made_by_the_server_whatever_the_client_sends(client, db):
    """Failed before the fix: a client's X-Request-ID became the id of its audit events, so
    a client could forge or reuse another request's id."""
    response = client.get(reverse("healthz"), HTTP_X_REQUEST_ID="abc123DEF")
    assert response["X-Request-ID"] != "abc123DEF"
    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])
    generated = client.get(reverse("healthz"))["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)


def test_state_change_is_logged_and_audited_with_the_request_id(scene, client, caplog):
    client.force_login(scene.world.users["operator"])
    caplog.handler.addFilter(RequestIdFilter())
    formatter = logging.Formatter(settings.LOGGING["formatters"]["structured"]["format"])
    with caplog.at_level(logging.INFO, logger="portal.foundation.audit"):
        response = client.post(
            reverse("clusters:cluster_start", args=[scene.cluster.pk]),
            HTTP_X_REQUEST_ID="req42start",
        )
        refused = client.post(
            reverse("clusters:cluster_delete", args=[scene.cluster.pk]),
            HTTP_X_REQUEST_ID="req43delete",
        )
    assert response.status_code == 302 and refused.status_code == 403
    started, deleted = response["X-Request-ID"], refused["X-Request-ID"]
    event = AuditEvent.objects.get(action="cluster.start")
    # The server's id is the key; what the client sent is kept apart, for correlation.
    assert (event.request_id, event.client_request_id) == (started, "req42start")
    refusal = AuditEvent.objects.get(action="cluster.delete")
    assert (refusal.request_id, refusal.client_request_id) == (deleted, "req43delete")
    lines = [formatter.format(r) for r in caplog.records if r.name == "portal.foundation.audit"]
    start = [line for line in lines if "action=cluster.start" in line]
    assert start and f"request_id={started}" in start[0] and "outcome=SUCCEEDED" in start[0]
    delete = [line for line in lines if "action=cluster.delete" in line]
    assert delete and f"request_id={deleted}" in delete[0] and "outcome=REFUSED" in delete[0]
