"""API fixtures: a token per actor and a client that checks every response against the
OpenAPI document (so the suite's responses are the schema-conformance test)."""

import json
import re
from functools import cache

import pytest
from django.test import Client
from openapi_schema_validator import OAS31Validator

from portal.api.main import api as portal_api
from portal.iam import tokens

ACTORS = ("admin", "operator", "viewer", "other")


@pytest.fixture
def secrets(world):
    """{actor: bearer secret}: admin/operator/viewer of ``demo``, admin of ``other``."""
    projects = {"other": world.other}
    return {
        name: tokens.issue_token(
            user=world.users[name], project_id=projects.get(name, world.demo).pk, name="t"
        )[1]
        for name in ACTORS
    }


@cache
def openapi_document() -> dict:
    return portal_api.get_openapi_schema(path_prefix="/api/v1")


def _operation(method: str, path: str) -> dict:
    for template, item in openapi_document()["paths"].items():
        pattern = "^" + re.sub(r"\\{[^}]+\\}", "[^/:]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method.lower() in item:
            return item[method.lower()]
    raise AssertionError(f"{method} {path} is not in the OpenAPI document")


def check_against_schema(method: str, path: str, response) -> None:
    """The response's status and content type are documented, and its body matches."""
    responses = _operation(method, path)["responses"]
    documented = responses.get(str(response.status_code)) or responses.get(response.status_code)
    assert documented, f"{method} {path}: status {response.status_code} is not documented"
    if response.status_code == 204:  # no content: none documented, none sent
        assert not documented.get("content") and response.content == b""
        return
    content_type = response["Content-Type"].split(";")[0].strip()
    content = documented.get("content", {})
    assert content_type in content, f"{method} {path}: {content_type} not in {list(content)}"
    schema = content[content_type]["schema"]
    if content_type.endswith("json"):
        body = json.loads(response.content)
        root = {**schema, "components": openapi_document()["components"]}
        OAS31Validator(root).validate(body)


class ApiClient:
    """``api.get("/virtual-clusters", token=secret)``: JSON in and out, every answer checked
    against the OpenAPI document."""

    def __init__(self):
        self.client = Client()

    def request(self, method, path, *, token=None, json_body=None, headers=None, check=True):
        headers = dict(headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        url = "/api/v1" + path
        kwargs = {"headers": headers}
        if json_body is not None:
            kwargs.update(data=json.dumps(json_body), content_type="application/json")
        response = getattr(self.client, method.lower())(url, **kwargs)
        if check:
            check_against_schema(method, url.split("?")[0], response)
        return response

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, json_body=body if body is not None else {}, **kw)

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, json_body=body if body is not None else {}, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


@pytest.fixture
def api(db):
    return ApiClient()
