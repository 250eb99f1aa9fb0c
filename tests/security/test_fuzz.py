"""Hostile input on every form and on the metrics ingest API: unicode, control
characters, huge strings, HTML/script, numbers out of range.

Never a 500 (the test client re-raises any exception a view lets escape), and markup we sent
never comes back unescaped. Example counts are modest so the whole file stays well under 60 s.
"""

import json
import time
from urllib.parse import urlsplit

import pytest
from django.core.cache import cache
from django.urls import reverse
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from metrics.models import METRIC_NAMES
from tests.conftest import PASSWORD

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI never flakes on a new draw
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Markup that must come back escaped wherever it is reflected. Each is distinctive ("xss"),
# so finding it verbatim in a response means it was not escaped.
MARKUP = [
    "<script>alert('xss')</script>",
    '"><img src=x onerror=alert("xss")>',
    "'><svg onload=alert('xss')>",
    "</title></textarea><script>alert('xss')</script>",
    "<a href=\"javascript:alert('xss')\">xss</a>",
    "{{ 'xss'|safe }}<b>xss</b>",
    '<div hx-get="/logout/" hx-trigger="load">xss</div>',
]

control = st.text(alphabet=st.characters(max_codepoint=0x1F), min_size=1, max_size=8)
any_text = st.text(max_size=80)  # all of unicode, control characters included


def _huge(sizes):
    return st.sampled_from(sizes).flatmap(
        lambda n: st.sampled_from(["가" * n, "a" * n, "<b>" * (n // 3), "\u202e" * n])
    )


huge = _huge([1_000, 70_000, 400_000])  # a form body: only the portal's own limits apply
# A query string: gunicorn refuses a request line over 4094 bytes (limit_request_line), so
# a longer parameter never reaches Django; 4094 characters is already past it. (Sending
# 400,000 made the test spend its minutes in urllib percent-encoding a 3.6 MB URL.)
huge_in_url = _huge([1_000, 4_094])
numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["0", "-1", "1e309", "NaN", "-0", "１２", "0x10", "9" * 40, "1.5", " 1 "]),
)


@st.composite
def hostile(draw, valid=(), huge=huge):
    """A string an attacker might send; ``valid``: values the field really accepts; ``huge``:
    ``huge_in_url`` for a query parameter."""
    choices = [
        any_text,
        control,
        numbers,
        st.sampled_from(MARKUP),
        st.tuples(any_text, st.sampled_from(MARKUP), control | any_text).map("".join),
        huge,
    ]
    if valid:
        choices.append(st.sampled_from([str(v) for v in valid]))
    return draw(st.one_of(*choices))


def drawn(data, fields, huge=huge):
    """One hostile value per field (``fields``: name -> the values it really accepts),
    drawn in the fields' order."""
    return {name: data.draw(hostile(valid=valid, huge=huge)) for name, valid in fields.items()}


def sent_markup(values):
    return [m for m in MARKUP if any(m in str(v) for v in values)]


def assert_safe(response, values):
    assert response.status_code < 500, response.status_code
    body = response.content.decode("utf-8", "replace")
    for markup in sent_markup(values):
        assert markup not in body, f"unescaped markup reflected: {markup!r}"


def same_site(location):
    """A redirect target that stays on this site (relative, or to the test host)."""
    parts = urlsplit(location.replace("\\", "/"))
    return parts.netloc in ("", "testserver") and parts.scheme in ("", "http", "https")


def fresh_limits():
    """Request rates count in the cache, login failures in the database: both cleared."""
    from portal.models import ThrottleWindow

    cache.clear()
    ThrottleWindow.objects.all().delete()


@pytest.fixture
def admin_client(scene, client):
    client.force_login(scene.world.admin)
    return client


htmx = st.sampled_from([{}, {"HTTP_HX_REQUEST": "true"}])


# ---------------------------------------------------------------------------------------------
# Console forms


def create_form_fields(url_name, w):
    """The fields of a create form, each with the values it really accepts."""
    if url_name == "clusters:cluster_create":
        return {
            "name": ["fuzz-ok", "클러스터-1"],
            "zone": [w.zone_a.pk, w.zone_b.pk],
            "instance_type": [w.h100.pk, w.l40s.pk],
            "fabric_type": ["INFINIBAND", "ROCE_V2"],
        }
    return {
        "name": ["vm-fuzz"],
        "zone": [w.zone_a.pk],
        "instance_type": [w.h100.pk, w.l40s.pk],
        "billing_type": ["ON_DEMAND", "SPOT", "RESERVED"],
        "disaster_recovery": ["on", "true", ""],
    }


@FUZZ
@pytest.mark.parametrize("url_name", ["clusters:cluster_create", "vms:vm_create"])
@given(data=st.data())
def test_create_forms(scene, admin_client, data, url_name):
    """Hostile values in every field of a create form, and a field it does not have."""
    values = drawn(data, create_form_fields(url_name, scene.world))
    values[data.draw(st.sampled_from(["project", "status", "x"]))] = data.draw(hostile())
    response = admin_client.post(reverse(url_name), values, **data.draw(htmx))
    assert_safe(response, values.values())


# The pages that read a query string, and the values each parameter really accepts.
PAGE_QUERIES = [
    pytest.param(
        ["clusters:cluster_form_options", "clusters:cluster_create", "vms:vm_create"],
        lambda w: {
            "zone": [w.zone_a.pk],
            "instance_type": [w.h100.pk],
            "name": (),
            "fabric_type": (),
        },
        id="create-pages",
    ),
    pytest.param(
        ["clusters:cluster_list", "vms:vm_list"],
        lambda w: {
            "q": ["alpha"],
            "status": ["RUNNING", "DELETED"],
            "zone": [w.zone_a.pk],
            "page": [1, 2, 999],
        },
        id="lists",
    ),
]


@FUZZ
@pytest.mark.parametrize(("url_names", "fields"), PAGE_QUERIES)
@given(data=st.data())
def test_page_queries_and_headers(scene, admin_client, data, url_names, fields):
    """Hostile values in every parameter a page reads, with hostile HTMX headers, request id
    and language cookie."""
    params = drawn(data, fields(scene.world), huge=huge_in_url)
    latin1 = st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=60)
    targets = st.sampled_from(["cluster-table", "vm-table", "create-fields"])
    headers = {
        **data.draw(htmx),
        "HTTP_HX_TARGET": data.draw(st.one_of(targets, latin1)),
        "HTTP_HX_CURRENT_URL": data.draw(latin1),
        "HTTP_X_REQUEST_ID": data.draw(latin1),
    }
    admin_client.cookies["portal_language"] = data.draw(
        st.one_of(
            st.sampled_from(["ko", "en"]),
            st.text(
                alphabet=st.characters(
                    min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=';,"\\'
                ),
                max_size=20,
            ),
        )
    )
    url = reverse(data.draw(st.sampled_from(url_names)))
    response = admin_client.get(url, params, **headers)
    assert_safe(response, params.values())


@FUZZ
@given(data=st.data())
def test_vm_rename_form(scene, admin_client, data):
    values = drawn(data, {"name": ["renamed-ok", scene.vm.name]})
    response = admin_client.post(
        reverse("vms:vm_edit", args=[scene.vm.pk]), values, **data.draw(htmx)
    )
    assert_safe(response, values.values())


@FUZZ
@given(data=st.data())
def test_vm_attach_form(scene, admin_client, data):
    values = drawn(
        data,
        {
            "action": ["attach", "detach", ""],
            "cluster": [scene.cluster.pk, scene.other_cluster.pk],
        },
    )
    vm = data.draw(st.sampled_from([scene.vm, scene.running_vm]))
    response = admin_client.post(reverse("vms:vm_cluster", args=[vm.pk]), values, **data.draw(htmx))
    assert_safe(response, values.values())
    scene.vm.refresh_from_db()
    assert scene.vm.cluster_id in (None, scene.cluster.pk)


@FUZZ
@given(data=st.data())
def test_project_switcher_and_language(scene, admin_client, data):
    values = drawn(
        data, {"project": [scene.world.demo.pk, scene.world.other.pk], "language": ["ko", "en"]}
    )
    values["next"] = data.draw(
        st.one_of(
            hostile(), st.sampled_from(["//evil.example", "https://evil.example", "/clusters/"])
        )
    )
    url = data.draw(st.sampled_from([reverse("switch_project"), reverse("set_language")]))
    response = admin_client.post(url, values)
    assert_safe(response, values.values())
    if response.status_code == 302:
        location = response["Location"]
        assert same_site(location), location


@pytest.mark.parametrize("next_url", ["0", "clusters", "x", "admin:index", "logout"])
def test_switch_project_with_a_bare_word_next(scene, admin_client, next_url):
    """A bare word once reached redirect(), which took it for a URL name: a 500 (found here)."""
    response = admin_client.post(
        reverse("switch_project"), {"project": scene.world.demo.pk, "next": next_url}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("clusters:cluster_list")


@FUZZ
@given(data=st.data())
def test_login_form(scene, client, data):
    fresh_limits()
    values = drawn(
        data,
        {
            "username": ["viewer", "admin"],
            "password": [PASSWORD],
            "next": ["/vms/", "//evil.example"],
        },
    )
    response = client.post(reverse("login"), values, **data.draw(htmx))
    assert_safe(response, values.values())
    if response.status_code == 302:
        assert same_site(response["Location"]), response["Location"]
    client.logout()


# ---------------------------------------------------------------------------------------------
# The metrics ingest API (bearer token, JSON)


@pytest.fixture
def ingest_token(scene):
    from metrics import services

    _vm, token = services.rotate_token(scene.running_vm.pk, actor=None)
    return token


finite = st.floats(allow_nan=False, allow_infinity=False)
metric_value = st.one_of(
    finite,
    st.floats(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.none(),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from([1e308, -1e-308, 100.0000001, 1e12 + 1]),
    st.lists(st.integers(), max_size=2),
)
json_leaf = st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=20))
json_any = st.recursive(
    json_leaf,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)
METRICS = METRIC_NAMES


NOW = time.time()  # fixed for the run: a strategy must not depend on the clock


@st.composite
def sample(draw):
    """A plausible sample with a few fields made hostile, left out or added."""
    values = {"ts": draw(st.floats(min_value=NOW - 8 * 86400, max_value=NOW + 900))}
    for name in METRICS:
        high = 100 if name.endswith("util") else 1e12
        values[name] = draw(st.floats(min_value=0, max_value=high))
    hostile_fields = st.lists(st.sampled_from(("ts",) + METRICS), max_size=2, unique=True)
    for name in draw(st.one_of(st.just([]), hostile_fields)):
        if draw(st.booleans()) and name not in ("ts", "cpu_util", "mem_util", "net_rx", "net_tx"):
            del values[name]
        else:
            values[name] = draw(metric_value)
    if draw(st.integers(0, 9)) == 0:
        values[draw(st.sampled_from(["<script>alert('xss')</script>", "extra", ""]))] = 1
    return values


@st.composite
def ingest_body(draw):
    kind = draw(st.sampled_from(["batch", "batch", "batch", "any-json", "bytes", "text"]))
    if kind == "batch":
        payload = {"samples": draw(st.lists(sample(), min_size=0, max_size=6))}
        if draw(st.booleans()):
            payload["vm"] = draw(st.one_of(metric_value, json_any))
        return json.dumps(payload, allow_nan=True).encode()
    if kind == "any-json":
        return json.dumps(draw(json_any), allow_nan=True).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    return draw(st.one_of(any_text, st.sampled_from(MARKUP), huge)).encode("utf-8", "surrogatepass")


@pytest.mark.slow
@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_ingest_api(scene, client, ingest_token, data):
    fresh_limits()
    body = data.draw(ingest_body())
    latin1 = st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=40)
    auth = data.draw(
        st.one_of(
            st.just(f"Bearer {ingest_token}"),
            st.just(f"Bearer {ingest_token}"),
            st.just(f"bearer  {ingest_token} "),
            latin1,
            latin1.map(lambda t: f"Bearer vcm_{t}"),
        )
    )
    content_type = data.draw(
        st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded", ""])
    )
    response = client.generic(
        "POST", reverse("metrics:ingest"), body, content_type=content_type, HTTP_AUTHORIZATION=auth
    )
    assert response.status_code in (200, 400, 401, 403, 409, 413, 429), (
        response.status_code,
        response.content[:300],
    )
    # What it stored as JSON; a refusal as problem+json, as /api/v1 answers one.
    json_type = "application/json" if response.status_code == 200 else "application/problem+json"
    assert response["Content-Type"].startswith(json_type), response["Content-Type"]
    assert response["X-Content-Type-Options"] == "nosniff"
    answer = response.json()
    event(f"ingest {response.status_code} {answer.get('code', '')}")
    assert ("stored" in answer) == (response.status_code == 200), answer
