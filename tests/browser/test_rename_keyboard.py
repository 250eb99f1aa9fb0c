"""이름 변경 from the keyboard, in Chromium at 1280 and 390 px: opening it moves the focus into
the field with the name selected; Esc cancels (the name as it was, the focus back on 이름
변경), as the dialogs do; Enter saves."""

import pytest
from playwright.sync_api import expect

from clusters.models import VirtualCluster
from tests.browser.pages import demo_cluster, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def name_selected(page, name):
    """The field's whole value is selected (by the page's script, once it has the focus)."""
    page.wait_for_function(
        "n => { const e = document.activeElement;"
        " return !!e && e.selectionStart === 0 && e.selectionEnd === n; }",
        arg=len(name),
    )


def test_rename_takes_the_focus_and_escape_cancels_it(browser_login, page, live_server):
    cluster = demo_cluster("old-name")
    browser_login("admin")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
        rename = page.locator("#cluster-rename")
        opener = rename.locator("summary")
        opener.focus()
        page.keyboard.press("Enter")
        field = rename.get_by_label("새 이름")
        expect(field).to_be_focused()
        name_selected(page, "old-name")
        page.keyboard.type("half-typed")
        shoot(page, "rename-open")
        page.keyboard.press("Escape")
        expect(field).to_be_hidden()
        expect(opener).to_be_focused()
        page.keyboard.press("Enter")
        expect(field).to_be_focused()
        expect(field).to_have_value("old-name")  # what was typed is gone with the cancel
        page.keyboard.press("Escape")
        assert VirtualCluster.objects.get(pk=cluster.pk).name == "old-name"

    opener.focus()
    page.keyboard.press("Enter")
    expect(field).to_be_focused()
    name_selected(page, "old-name")  # typing replaces it
    page.keyboard.type("new-name")
    page.keyboard.press("Enter")
    expect(page.locator("#cluster-header h1")).to_have_text("new-name")
    assert VirtualCluster.objects.get(pk=cluster.pk).name == "new-name"
