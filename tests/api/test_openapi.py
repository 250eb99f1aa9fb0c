"""The OpenAPI 3.1 document is valid and names every route; the docs page is ours."""

import re

import pytest
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db


def test_the_document_is_valid_openapi_3_1(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_every_operation_is_secured_and_its_errors_are_problem_documents(client):
    document = client.get("/api/v1/openapi.json").json()
    assert document["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert operation.get("security"), f"{method} {path} is not authenticated"
            for status in ("401", "404", "422", "429"):
                content = operation["responses"][status]["content"]
                assert list(content) == ["application/problem+json"], (method, path, status)


def test_the_docs_page_loads_only_our_own_files(client):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    page = response.content.decode()
    # What the page loads (its links back to the console are navigation, not files).
    sources = re.findall(r'src="([^"]+)"', page) + re.findall(r'<link [^>]*href="([^"]+)"', page)
    assert sources and all(s.startswith("/api/v1/docs/assets/") for s in sources), sources
    for source in sources:
        asset = client.get(source)
        assert asset.status_code == 200, source
        assert b"".join(asset.streaming_content)
    # Only same-origin scripts, no inline code: the portal's CSP ('self' + nonce) allows it.
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", page)
    assert '"url": "/api/v1/openapi.json"' in page


def test_assets_are_a_fixed_list(client):
    assert client.get("/api/v1/docs/assets/../../settings.py").status_code == 404
    assert client.get("/api/v1/docs/assets/redoc.standalone.js").status_code == 404


def test_an_unknown_api_path_is_a_problem_document(client):
    response = client.get("/api/v1/no-such-thing", headers={"Accept-Language": "en"})
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_found"
