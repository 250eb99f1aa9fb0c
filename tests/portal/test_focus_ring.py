"""The focus ring is seen: at least 3:1 against what it is drawn on (WCAG 2.2, 1.4.11), on the
page, on the panels and on the dark top bar. (That the tabs do not clip it is a browser check:
tests/browser/test_phone_layout.py.)"""

import re

from tests.portal.test_accessibility import CSS, _rules, contrast

NON_TEXT = 3.0


def test_the_focus_ring_has_3_to_1_on_every_background_it_meets():
    rules = dict(_rules(CSS.read_text()))
    root = rules[":root"]

    def colour(value):
        value = value.strip()
        match = re.fullmatch(r"var\((--[\w-]+)\)", value)
        return colour(root[match.group(1)]) if match else value

    ring = colour(rules[":focus-visible"]["outline"].split()[-1])
    for background in (root["--surface"], root["--bg"], "#f8f9fb", "#e7eefc"):
        assert contrast(ring, colour(background)) >= NON_TEXT, (ring, background)
    on_topbar = colour(rules[".topbar :focus-visible"]["outline-color"])
    assert contrast(on_topbar, colour(rules[".topbar"]["background"])) >= NON_TEXT
    assert contrast(on_topbar, "#243142") >= NON_TEXT  # the project select's own background
