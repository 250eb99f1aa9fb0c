"""What browser walks share about the console's one confirmation dialog (base.html's
#confirm-dialog) and about pictures of it: ``confirm`` answers it as a user would,
``shoot`` saves the page at the desktop and phone widths for a person to look at."""

import os
from pathlib import Path

from playwright.sync_api import expect

SHOTS = Path(os.environ.get("CONSOLE_SHOTS", "/tmp/h-dialog"))  # noqa: S108 - pictures to look at
WIDTHS = (1280, 390)


def confirm_dialog(page):
    return page.locator("#confirm-dialog")


def confirm(page, says=None):
    """Wait for the dialog, check its question (if given), press its confirm button; return
    the question it asked."""
    dialog = confirm_dialog(page)
    expect(dialog).to_be_visible()
    title = dialog.locator("#confirm-title")
    if says is not None:
        expect(title).to_have_text(says)
    question = title.text_content()
    dialog.locator("#confirm-ok").click()
    expect(dialog).not_to_be_visible()
    return question


def cancel(page):
    dialog = confirm_dialog(page)
    dialog.locator("#confirm-cancel").click()
    expect(dialog).not_to_be_visible()


def shoot(page, name):
    """The page as it is now at each width (then back to the first), under ``SHOTS``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": size["height"] if size else 900})
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
    if size:
        page.set_viewport_size(size)


def switch_language(page, to):
    """The top bar's language button ("English" / "한국어"); the page reloads in it."""
    page.get_by_role("button", name=to).click()
    expect(page.locator("html")).to_have_attribute("lang", "en" if to == "English" else "ko")
