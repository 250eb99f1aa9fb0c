"""The API 토큰 page in Chromium: a new token is shown once, in a box with a 복사 button that
puts exactly the secret on the clipboard; the page fits a phone; the next visit shows only the
token's prefix. And the Django admin at 1280 px: headers as written (Gb/s, not GB/S), the
audit log in labels, no column cut off.

``SCREENSHOTS=/some/dir`` saves the pages at 1280 and 390 px, in Korean and English.
"""

import re

import pytest
from playwright.sync_api import expect

from portal.models import ApiToken
from tests.browser.pages import demo_cluster, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.mark.parametrize("language", ["ko", "en"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_new_token_is_shown_once_with_a_copy_button(
    browser_login, page, live_server, viewport, language
):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    browser_login("operator")
    if language == "en":
        page.get_by_role("button", name="English").click()
        expect(page.locator("html")).to_have_attribute("lang", "en")
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/account/api-tokens/")
    page.locator("#token-name").fill("pipeline")
    page.locator("#new-token-title ~ form button[type=submit]").click()
    secret = page.locator("#new-token")
    expect(secret).to_be_visible()
    shoot(page, "api-tokens-issued")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    box = secret.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]  # wrapped, whole
    value = secret.inner_text()
    assert value.startswith(ApiToken.PREFIX)
    page.locator("#copy-token").click()
    expect(page.locator("#copy-token")).to_have_class(re.compile(r"\bcopied\b"))
    assert page.evaluate("navigator.clipboard.readText()") == value
    page.goto(f"{live_server.url}/account/api-tokens/")
    expect(page.locator("#new-token")).to_have_count(0)
    expect(page.locator("tr[data-token-name=pipeline]")).to_contain_text(value[:12])
    assert value not in page.content()
    shoot(page, "api-tokens")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")


# The admin's column headers: each shows its whole text, as written.
HEADERS = """
() => Array.from(document.querySelectorAll("#result_list thead th")).map((th) => {
  const text = th.querySelector(".text") || th;
  return {
    text: text.innerText.trim(),
    transform: getComputedStyle(text).textTransform,
    cut: text.scrollWidth > text.clientWidth + 1,
    right: th.getBoundingClientRect().right,
  };
})
"""


def test_the_admin_shows_its_labels_as_written(browser_login, page, live_server):
    from django.contrib.auth import get_user_model

    from clusters.validation.thresholds import threshold_for
    from portal.catalog.models import FabricType, InstanceType
    from portal.iam import tokens
    from portal.models import Project

    for fabric in FabricType.values:
        threshold_for(InstanceType.objects.get(code="gpu.h100x8"), fabric)
    demo_cluster("audited")
    admin = get_user_model().objects.get(username="admin")
    tokens.issue_token(user=admin, project_id=Project.objects.get(slug="demo").pk, name="ci")
    page.set_viewport_size(DESKTOP)
    browser_login("root")
    for name, path in (
        ("admin-thresholds", "clusters/validationthreshold/"),
        ("admin-audit", "portal/auditevent/"),
        ("admin-vms", "vms/virtualmachine/"),
        ("admin-clusters", "clusters/virtualcluster/"),
        ("admin-users", "auth/user/"),
        ("admin-tokens", "portal/apitoken/"),
    ):
        page.goto(f"{live_server.url}/admin/{path}")
        shoot(page, name)
        headers = page.evaluate(HEADERS)
        assert headers, name
        assert [h for h in headers if h["transform"] != "none" or h["cut"]] == [], name
        # The list's box scrolls sideways when a column does not fit: none may be out of sight.
        results = page.locator("#changelist .results")
        assert results.evaluate("el => el.scrollWidth <= el.clientWidth + 1"), name
        if name == "admin-thresholds":
            assert any("Gb/s" in h["text"] for h in headers)
        if name == "admin-audit":
            expect(page.locator("#result_list")).to_contain_text("클러스터 생성")
            expect(page.locator("#result_list")).not_to_contain_text("cluster.create")
    page.goto(f"{live_server.url}/admin/")
    shoot(page, "admin-index")
