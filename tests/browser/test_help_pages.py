"""The help pages in Chromium: in Korean and English, at 1280 and 390 px, neither the help
page nor the InfiniBand benchmark page scrolls sideways (wide commands and tables scroll
inside their own box).

``SCREENSHOTS=/some/dir`` saves each page at both widths in both languages.
"""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.test_a11y_mobile import running_cluster

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = os.environ.get("SCREENSHOTS")
FITS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def test_help_pages_fit_at_390_and_1280_px(browser_login, page, live_server):
    cluster = running_cluster(members=4)
    browser_login("admin")
    pages = {"help": "/clusters/help/", "infiniband": f"/clusters/{cluster.pk}/infiniband/"}
    for language in ("ko", "en"):
        if language == "en":
            page.get_by_role("button", name="English").click()
            expect(page.locator("html")).to_have_attribute("lang", "en")
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            for name, url in pages.items():
                page.goto(live_server.url + url)
                expect(page.locator("h1")).to_be_visible()
                if SHOTS:
                    Path(SHOTS).mkdir(parents=True, exist_ok=True)
                    shot = f"{SHOTS}/{name}-{width}-{language}.png"
                    page.screenshot(path=shot, full_page=True)
                assert page.evaluate(FITS), f"{name} ({language}) scrolls sideways at {width} px"
