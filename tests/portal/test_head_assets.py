"""Every page's head: the icon and the stylesheet, then htmx and the console's scripts, each
deferred with the request's CSP nonce (the static URLs are looked up once per process)."""

import re

import pytest
from django.test import override_settings

HEAD = re.compile(r"<head>(.*?)</head>", re.S)


def head_of(response) -> str:
    assert response.status_code == 200
    return HEAD.search(response.content.decode()).group(1)


def test_the_head_loads_the_stylesheet_and_the_scripts_in_order_with_the_nonce(world, login):
    client = login("admin")
    for url in ("/clusters/", "/vms/", f"/clusters/{world.cluster().pk}/"):
        response = client.get(url)
        nonce = re.search(r"'nonce-([^']+)'", response["Content-Security-Policy"]).group(1)
        head = head_of(response)
        assert '<link rel="icon" href="/static/portal/favicon.svg" type="image/svg+xml">' in head
        assert '<link rel="stylesheet" href="/static/portal/console.css">' in head
        scripts = re.findall(r"<script [^>]*></script>", head)
        assert scripts == [
            f'<script src="/static/{path}" nonce="{nonce}" defer></script>'
            for path in ("django_htmx/htmx-2.min.js", "portal/console.js", "portal/dialogs.js")
        ]


def test_the_detail_page_defers_its_scripts_with_the_nonce(world, login):
    """Its operations script, and on every tab the charts' script, which runs plotly.js (the
    메트릭 tab names it) once the page is idle."""
    response = login("admin").get(f"/clusters/{world.cluster().pk}/")
    nonce = re.search(r"'nonce-([^']+)'", response["Content-Security-Policy"]).group(1)
    page = response.content.decode()
    for path in ("clusters/operations.js", "metrics/charts.js"):
        assert f'<script src="/static/{path}" nonce="{nonce}" defer></script>' in page
    tab = re.search(r'<a role="tab" id="tab-metrics"[^>]*>', page).group(0)
    assert 'data-plotly-src="/static/metrics/vendor/plotly-metrics.min.js"' in tab


@pytest.mark.parametrize("debug", [True, False])
def test_django_htmx_error_script_comes_in_debug_only(world, login, debug):
    client = login("admin")
    with override_settings(DEBUG=debug):
        head = head_of(client.get("/clusters/"))
    assert ("django_htmx/django-htmx.js" in head) is debug


def test_every_file_the_head_names_is_a_static_file():
    """A path mistyped in the head would be a 404 on every page: each one is found."""
    from django.contrib.staticfiles import finders

    from portal.templatetags.console import FAVICON, HEAD_SCRIPTS, STYLESHEET

    for path in (
        FAVICON,
        STYLESHEET,
        *HEAD_SCRIPTS,
        "clusters/operations.js",
        "metrics/charts.js",
        "metrics/vendor/plotly-metrics.min.js",
    ):
        assert finders.find(path), path
