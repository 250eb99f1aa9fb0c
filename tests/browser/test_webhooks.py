"""The 웹훅 page in Chromium at 1280 and 390 px: a webhook created with the secret shown once
(and fitting a phone), 테스트 전송 to a real receiver, its attempt in the 전송 기록 with the
receiver's status code; the next visit shows no secret.

``SCREENSHOTS=/some/dir`` saves the pages.
"""

import pytest
from playwright.sync_api import expect

from portal.webhooks.models import Webhook
from tests.browser.pages import shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_create_see_the_secret_once_then_test_send(
    browser_login, page, live_server, receiver, viewport
):
    browser_login("admin")
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/webhooks/")
    page.locator("#webhook-name").fill("alerts")
    page.locator("#webhook-url").fill(receiver.url)
    page.locator("#new-webhook-title ~ form button[type=submit]").click()
    secret = page.locator("#webhook-secret")
    expect(secret).to_be_visible()
    assert secret.inner_text() == Webhook.objects.get().secret
    shoot(page, "webhook-created")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    page.goto(f"{live_server.url}/webhooks/")
    expect(page.locator("#webhook-secret")).to_have_count(0)
    row = page.locator("tr[data-webhook-name=alerts]")
    receiver.answers = [500]
    row.get_by_role("button", name="테스트 전송").click()
    attempt = page.locator("#webhook-log [data-attempt='1']")
    expect(attempt).to_contain_text("500")
    expect(page.locator("#webhook-log")).to_contain_text("webhook.test")
    assert len(receiver.requests) == 1
    shoot(page, "webhook-log")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
