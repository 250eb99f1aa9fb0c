"""Accessibility of every console page, checked on the rendered HTML and on the stylesheet:
WCAG AA contrast of every text colour pair, unique ids, references that resolve, an
accessible name on every control, labelled status badges, tabs per the ARIA tabs pattern.
What only a browser can show (390 px, keys, focus) is in tests/browser."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import translation

from clusters import services
from clusters.models import ClusterStatus
from portal.foundation.errors import RuleViolation, SpotOrDrVm
from portal.foundation.event_text import ACTION_LABELS
from portal.templatetags.console import status_badge
from tests.portal import html_audit
from vms.models import BillingType, VmStatus

CSS = Path(settings.BASE_DIR) / "static/portal/console.css"
AA = 4.5
HX = {"HTTP_HX_REQUEST": "true"}
TOPBAR_SELECTORS = (".topbar", ".project-switch", ".whoami")


# -- Contrast, computed from console.css --------------------------------------------------


def _rules(css: str):
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    for match in re.finditer(r"([^{}]+)\{([^{}]*)\}", css):
        selector = match.group(1).strip()
        declarations = {}
        for declaration in match.group(2).split(";"):
            if ":" in declaration:
                key, value = declaration.split(":", 1)
                declarations[key.strip()] = value.strip()
        yield selector, declarations


def _luminance(colour: str) -> float:
    hexa = colour.lstrip("#")
    if len(hexa) == 3:
        hexa = "".join(c * 2 for c in hexa)
    channels = [int(hexa[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2.x contrast ratio of two #rgb / #rrggbb colours."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def colour_pairs():
    """(selector, text colour, background) for every rule that sets a text colour.

    The background is the rule's own; a badge variant without one sits on ``.badge``'s; the
    top bar's text on the top bar; any other text on the worse of the surface and the page.
    """
    rules = list(_rules(CSS.read_text()))
    root = next(d for s, d in rules if s == ":root")

    def resolve(value):
        match = re.fullmatch(r"var\((--[\w-]+)\)", value.strip())
        return resolve(root[match.group(1)]) if match else value.strip()

    def background(declarations):
        value = declarations.get("background-color", declarations.get("background", ""))
        value = resolve(value) if value else ""
        return value if value.startswith("#") else ""

    by_selector = dict(rules)
    topbar = background(by_selector[".topbar"])
    for selector, declarations in rules:
        if "color" not in declarations or selector == ":root":
            continue
        text = resolve(declarations["color"])
        if not text.startswith("#"):
            continue
        own = background(declarations)
        if own:
            yield selector, text, own
        elif selector.startswith(".badge-"):
            yield selector, text, background(by_selector[".badge"])
        elif selector.startswith(TOPBAR_SELECTORS):
            yield selector, text, topbar
        else:
            yield selector, text, resolve(root["--surface"])
            yield selector, text, resolve(root["--bg"])


def test_contrast_helper_matches_known_ratios():
    assert round(contrast("#000", "#fff"), 1) == 21.0
    assert round(contrast("#a86400", "#fff3dc"), 2) == 4.26  # the old 준비중/할당됨 badge


def test_every_text_colour_pair_meets_wcag_aa():
    pairs = list(colour_pairs())
    assert any(s.startswith(".badge-provisioning") for s, _t, _b in pairs)
    failing = [
        f"{selector}: {text} on {bg} = {contrast(text, bg):.2f}"
        for selector, text, bg in pairs
        if contrast(text, bg) < AA
    ]
    assert failing == [], "below WCAG AA 4.5:1"


# -- The rendered pages -------------------------------------------------------------------


@pytest.fixture
def pages(world, login, django_capture_on_commit_callbacks):
    """Every console page an admin sees, each as one parsed document; a create panel that
    opens inside a list is inserted there, as htmx would."""
    cluster = world.cluster("llm-train")
    first, second = world.vm("node-01"), world.vm("node-02")
    world.vm("spare")
    loose = world.vm("loose")
    with django_capture_on_commit_callbacks(execute=True):
        services.attach_vm(first.pk, cluster.pk, actor=world.admin)
        services.attach_vm(second.pk, cluster.pk, actor=world.admin)
    cluster.status = ClusterStatus.RUNNING
    cluster.save(update_fields=["status"])
    for i, vm in enumerate((first, second)):
        vm.status = VmStatus.RUNNING if i else VmStatus.STOPPED
        vm.private_ip = f"10.0.0.{i + 2}"
        vm.save(update_fields=["status", "private_ip"])
    client = login("admin")

    def get(url, **extra):
        response = client.get(url, **extra)
        assert response.status_code == 200, url
        return response.content.decode()

    def collect():
        documents = {}
        for url, panel in (("/clusters/", "/clusters/new/"), ("/vms/", "/vms/new/")):
            page = html_audit.parse(get(url))
            documents[url] = page
            documents[f"{url} + {panel}"] = html_audit.insert(
                html_audit.parse(get(url)), "create-panel", html_audit.parse(get(panel, **HX))
            )
        for url in (
            "/clusters/new/",
            "/vms/new/",
            f"/clusters/{cluster.pk}/",
            f"/clusters/{cluster.pk}/vms/",
            f"/clusters/{cluster.pk}/metrics/",
            f"/clusters/{cluster.pk}/activity/",
            f"/vms/{first.pk}/",
            f"/vms/{loose.pk}/",
        ):
            documents[url] = html_audit.parse(get(url))
        return documents

    collect.cluster = cluster
    collect.client = client
    collect.get = get
    return collect


def test_ids_are_unique_and_references_resolve_on_every_page(pages):
    documents = pages()
    problems = {
        name: html_audit.duplicate_ids(doc) + html_audit.dangling_references(doc)
        for name, doc in documents.items()
    }
    assert {k: v for k, v in problems.items() if v} == {}


def test_login_page_ids_and_names(client, world):
    doc = html_audit.parse(client.get("/login/").content.decode())
    assert html_audit.duplicate_ids(doc) == []
    assert html_audit.unnamed_controls(doc) == []


def test_every_control_has_an_accessible_name_on_every_page(pages):
    for language in ("ko", "en"):
        with translation.override(language):
            pages.client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
            unnamed = {n: html_audit.unnamed_controls(d) for n, d in pages().items()}
        assert {k: v for k, v in unnamed.items() if v} == {}, language


def test_the_status_badge_is_labelled_with_what_it_is(world):
    cluster = world.cluster("c", status=ClusterStatus.RUNNING)
    badge = html_audit.parse(status_badge(cluster)).children[0]
    # role=img: a span may carry a name only with a role; the visible text stays "실행중"
    assert (badge.attrs["role"], badge.attrs["aria-label"], badge.text()) == (
        "img",
        "상태: 실행중",
        "실행중",
    )
    with translation.override("en"):
        assert 'aria-label="Status: Running"' in status_badge(cluster)


def test_tabs_follow_the_aria_tabs_pattern_and_the_last_click_wins(pages):
    doc = pages()[f"/clusters/{pages.cluster.pk}/vms/"]
    tablist = next(n for n in doc.walk() if n.attrs.get("role") == "tablist")
    tabs = [n for n in tablist.walk() if n.attrs.get("role") == "tab"]
    assert [t.attrs.get("tabindex") for t in tabs] == ["-1", "0", "-1", "-1"]
    assert [t.attrs["aria-selected"] for t in tabs] == ["false", "true", "false", "false"]
    # The last click wins in console.js, which drops the older answers for the panel (the
    # browser walk test_a_tab_opened_while_the_panel_refreshes_wins_and_nothing_is_aborted);
    # nothing aborts a request, which htmx would log as an error: no hx-sync here.
    assert "hx-sync" not in tablist.attrs
    assert tablist.attrs["hx-target"] == "#tab-panel"


def test_live_status_changes_have_a_polite_live_region_on_every_page(pages):
    for name, doc in pages().items():
        regions = [n for n in doc.walk() if n.attrs.get("id") == "live-status"]
        assert len(regions) == 1, name
        assert (
            regions[0].attrs.get("aria-live") == "polite"
            and regions[0].attrs.get("role") == "status"
        ), name


def test_filter_labels_name_their_own_controls_not_the_create_forms(pages):
    doc = pages()["/clusters/ + /clusters/new/"]
    labels = {n.attrs["for"]: n.text() for n in doc.walk() if n.tag == "label" and "for" in n.attrs}
    assert labels["filter_zone"] == "가용 영역" and labels["id_zone"] == "가용 영역"
    zone_selects = [n for n in doc.walk() if n.tag == "select" and n.attrs.get("name") == "zone"]
    assert sorted(s.attrs["id"] for s in zone_selects) == ["filter_zone", "id_zone"]


def test_row_buttons_name_their_vm(pages):
    doc = pages()["/vms/"]
    names = [n for n in html_audit.names_of(doc, "button") if n.endswith((" 시작", " 중지"))]
    assert "node-01 시작" in names and "node-02 중지" in names


def test_the_two_save_buttons_of_the_vm_page_are_told_apart(pages):
    doc = pages()[f"/vms/{pages.cluster.members.first().pk}/"]
    names = html_audit.names_of(doc, "button")
    assert len(names) == len(set(names)), names


# -- English mode (the console; the admin is in test_admin_labels) ------------------------

HANGUL = re.compile(r"[\uac00-\ud7a3]")


def test_activity_tab_speaks_english_in_english_mode(pages, world):
    client, cluster = pages.client, pages.cluster
    spot = world.vm("spot-01", billing_type=BillingType.SPOT)
    with pytest.raises(RuleViolation):  # a refusal is audited with its rule's code
        services.attach_vm(spot.pk, cluster.pk, actor=world.admin)
    client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    doc = html_audit.parse(pages.get(f"/clusters/{cluster.pk}/activity/"))
    body = next(n for n in doc.walk() if n.tag == "tbody")
    rows = [
        [td.text() for td in tr.walk() if td.tag == "td"] for tr in body.walk() if tr.tag == "tr"
    ]
    with translation.override("en"):
        attach = str(ACTION_LABELS["vm.attach"])
    assert attach != "클러스터에 연결"
    assert [row[1] for row in rows] == [attach, attach, attach], rows
    with translation.override("en"):
        refusal = SpotOrDrVm().message
    assert not HANGUL.search(refusal) and refusal in rows[0][5], rows[0]
    for row in rows:
        assert not HANGUL.search(" ".join(row)), row
        assert not re.search(r"\b(vm|cluster)\.[a-z_]+\b", " ".join(row)), row


def test_no_korean_is_left_on_any_page_in_english_mode(pages):
    pages.client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    leftovers = {}
    for name, doc in pages().items():
        main = next(n for n in doc.walk() if n.tag == "body")
        text = main.text().replace("한국어", "")  # the switcher names Korean in Korean
        found = sorted(set(re.findall(r"\S*[\uac00-\ud7a3]+\S*", text)))
        if found:
            leftovers[name] = found
        assert "Virtual" in text, name  # it is the English page
        for node in doc.walk():
            for attr in ("aria-label", "title", "hx-confirm", "placeholder"):
                if HANGUL.search(node.attrs.get(attr, "")) and node.attrs.get("lang") != "ko":
                    leftovers.setdefault(name, []).append(f"{attr}={node.attrs[attr]}")
    assert leftovers == {}


def test_no_template_syntax_reaches_a_page(pages):
    """A ``{# … #}`` comment spanning lines is printed as text (it once put a paragraph of
    developer notes at the top of every page)."""
    for name, doc in pages().items():
        text = next(n for n in doc.walk() if n.tag == "html").text()
        assert not re.search(r"\{#|#\}|\{%|%\}", text), name


def test_page_titles_are_english_in_english_mode(pages):
    pages.client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    for name, doc in pages().items():
        title = next(n for n in doc.walk() if n.tag == "title").text()
        assert title and not HANGUL.search(title), (name, title)
