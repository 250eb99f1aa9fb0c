"""Browser tests: Debian's Chromium driven by Playwright against pytest-django's live server.

Playwright never downloads a browser here: ``browser_type_launch_args`` points it at
``/usr/bin/chromium``. Data comes from ``seed_demo`` (the demo a user would see after the
README's first command). Transitions run in a real Celery worker thread on an in-memory
broker, so the page has to show progress by itself (htmx polling), exactly as in production;
with the suite's default of eager tasks the whole walk to 실행중 would finish inside the POST
and the polling would never be exercised.
"""

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from portal.iam.permissions import BUILTIN_ROLES
from portal.models import Role

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DEMO_PASSWORD = "browser-demo-pass-1"
# How long an expectation waits for the page to change by itself (polling is every 2 s).
SETTLE_MS = 10_000


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    # The browser asks for English: the console still answers in Korean (docs/rules.md#language).
    return {
        **browser_context_args,
        "viewport": {"width": 1280, "height": 900},
        "locale": "en-US",
    }


expect.set_options(timeout=SETTLE_MS)


def script_errors(page) -> list[str]:
    """The script errors and console errors ``page`` logs from now on (the browser's own
    "Failed to load resource" line for a refused request is not one)."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on(
        "console",
        lambda msg: (
            errors.append(f"console: {msg.text}")
            if msg.type == "error" and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )
    return errors


@pytest.fixture
def page(page):
    """The page, failing the test on any script error or CSP violation it logged.

    Refused requests (403/404/409) are expected in these walks; the browser's own "Failed to
    load resource" line for them is not a script error.
    """
    page.set_default_timeout(SETTLE_MS)
    errors = script_errors(page)
    yield page
    assert errors == [], "the page logged errors"


@pytest.fixture
def demo(monkeypatch):
    """The demo data of ``seed_demo``; ``demo.password`` logs any of its users in.

    Browser tests are transactional (the live server reads what the test writes), so the
    database is flushed after each one, built-in roles included. ``serialized_rollback`` can't
    bring them back here: once Playwright's sync API runs, asgiref sees a running event loop
    and hands out a different connection object, one without the serialized contents. So the
    roles are made again, as the data migration made them.
    """
    for name, permissions in BUILTIN_ROLES.items():
        Role.objects.get_or_create(name=name, defaults={"permissions": sorted(permissions)})
    monkeypatch.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
    call_command("seed_demo", stdout=io.StringIO())

    class Demo:
        password = DEMO_PASSWORD

    return Demo()


@pytest.fixture
def celery_worker(demo, settings):
    """A real Celery worker in a thread, on kombu's in-memory broker (nothing shared with any
    other worker on this machine). Seed first: ``seed_demo`` itself runs eagerly."""
    from portal.celery import app
    from tests.faults.harness import thread_worker

    with thread_worker(app, "memory://", {"polling_interval": 0.05}, shutdown_timeout=30) as w:
        yield w


@pytest.fixture
def browser_login(page, live_server, demo):
    """``browser_login("admin")``: sign in through the login form, like a user."""

    def _login(username):
        page.goto(f"{live_server.url}/login/")
        page.get_by_label("사용자 이름").fill(username)
        page.get_by_label("비밀번호").fill(demo.password)
        page.get_by_role("button", name="로그인").click()
        page.wait_for_url(f"{live_server.url}/clusters/")
        return page

    return _login
