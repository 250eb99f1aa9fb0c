"""The docs page in Chromium: swagger-ui from our own files renders every operation under
the portal's CSP, with no script error or CSP violation (tests/browser's page fixture)."""

import pytest
from playwright.sync_api import expect

from tests.api.conftest import openapi_document
from tests.browser.conftest import (  # noqa: F401 - the fixtures
    browser_type_launch_args,
    page,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_docs_page_renders_every_operation(page, live_server):  # noqa: F811
    external = []
    page.on(
        "request",
        lambda r: (
            external.append(r.url)
            if not r.url.startswith(live_server.url) and not r.url.startswith("data:")
            else None
        ),
    )
    page.goto(f"{live_server.url}/api/v1/docs")
    operations = sum(len(item) for item in openapi_document()["paths"].values())
    expect(page.locator(".opblock")).to_have_count(operations)
    assert external == []
