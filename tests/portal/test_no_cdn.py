"""Everything the portal loads comes from the portal: no template and no shipped asset names
a CDN or another host to fetch from (machines here are offline; the CSP allows only 'self')."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Hosts that appear in shipped files without ever being fetched: XML namespaces and the
# licence/credit comments of vendored code.
NOT_FETCHED = re.compile(
    r"https?://(www\.w3\.org|feross\.org|getify\.mit-license\.org|syntheti\.cc|github\.com"
    r"|plotly\.com/(javascript/animations/)?$|plotly\.com/$)"
)
URL = re.compile(r"https?://[A-Za-z0-9.\-]+(/[^\s\"'`)<>]*)?")


def shipped_files():
    # Everything under static/ is collected and served, its notes (*.md) included.
    static = ("*.js", "*.css", "*.html", "*.md", "*.txt", "*.json")
    for folder, patterns in (("templates", ("*.html",)), ("static", static)):
        for pattern in patterns:
            yield from sorted((ROOT / folder).rglob(pattern))


def test_no_shipped_file_names_an_external_host_to_load_from():
    found = {}
    for path in shipped_files():
        urls = [m.group(0) for m in URL.finditer(path.read_text(errors="replace"))]
        external = [u for u in urls if not NOT_FETCHED.match(u) and u != "https://plotly.com/"]
        if external:
            found[str(path.relative_to(ROOT))] = sorted(set(external))
    assert found == {}
