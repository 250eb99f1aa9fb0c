"""The API object: bearer-token auth, problem+json errors, OpenAPI 3.1 and the docs page.

django-ninja (not DRF + drf-spectacular): the OpenAPI 3.1 document is generated from the
same pydantic types that validate requests and shape responses, so the schema cannot
drift from the code; it is plain function views like the console's; and its swagger-ui
assets ship inside the package, so the docs page needs no CDN.
"""

import copy
from http import HTTPStatus
from pathlib import Path

import ninja
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import translation
from django.utils.html import escape
from django.views.decorators.cache import cache_control
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.openapi.docs import DocsBase
from ninja.renderers import BaseRenderer
from ninja.security import HttpBearer

from portal.api import (
    catalog,
    clusters,
    guard,
    operations,
    spares,
    ssh_keys,
    validation,
    vms,
    webhooks,
)
from portal.api.common import api_headers, json_bytes
from portal.api.problems import problem_response, validation_problem
from portal.api.schemas import Problem
from portal.foundation.errors import NotFound, RuleViolation
from portal.foundation.errors.api import RequestInvalid, TokenRequired
from portal.foundation.problems import PROBLEM_TYPE, activate_api_language
from portal.iam import tokens

# Every authenticated operation may answer these, whatever else it documents; a change may
# also be refused for a missing permission or by a rule.
COMMON_ERRORS = (400, 401, 404, 422, 429)
CHANGE_ERRORS = (403, 409, 411, 413, 415)
SWAGGER_DIR = Path(ninja.__file__).parent / "static" / "ninja"
SWAGGER_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-init.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}


class BearerToken(HttpBearer):
    """``Authorization: Bearer vcp_…`` only: a session cookie never authenticates the API."""

    def __call__(self, request: HttpRequest):
        activate_api_language(request)
        return tokens.authenticate(request)

    def authenticate(self, request: HttpRequest, token: str):  # required by HttpBearer
        return tokens.authenticate(request)


class LocalSwagger(DocsBase):
    """Swagger UI from ninja's own copy of its assets (served by ``swagger_asset``)."""

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs) -> HttpResponse:
        base = request.path.rstrip("/")
        openapi_url = escape(self.get_openapi_url(api, kwargs))
        # The way back to the console, in the console's language.
        links = " · ".join(
            f'<a href="{reverse(name)}">{escape(label)}</a>'
            for name, label in (
                ("clusters:cluster_list", translation.gettext("← 콘솔로 돌아가기")),
                ("api_tokens", translation.gettext("API 토큰")),
            )
        )
        html = f"""<!doctype html>
<html lang="{translation.get_language()}"><head><meta charset="utf-8">
<title>{escape(api.title)}</title>
<link rel="stylesheet" href="{base}/assets/swagger-ui.css">
<link rel="icon" href="{base}/assets/favicon.png"></head>
<body data-csrf-token="" data-api-csrf="">
<script type="application/json" id="swagger-settings">
{{"url": "{openapi_url}", "layout": "BaseLayout", "deepLinking": true}}
</script>
<nav id="console-links">{links}</nav>
<div id="swagger-ui"></div>
<script src="{base}/assets/swagger-ui-bundle.js"></script>
<script src="{base}/assets/swagger-ui-init.js"></script>
</body></html>"""
        return HttpResponse(html)


@require_GET
@cache_control(max_age=86400, public=True)
def swagger_asset(request: HttpRequest, name: str) -> FileResponse:
    """One of the few files the docs page loads, straight from the installed package."""
    if name not in SWAGGER_ASSETS:
        raise Http404(name)
    return FileResponse((SWAGGER_DIR / name).open("rb"), content_type=SWAGGER_ASSETS[name])


class OrjsonRenderer(BaseRenderer):
    """UTF-8 JSON (Korean readable as is), about 2x faster than the standard encoder."""

    media_type = "application/json"

    def render(self, request, data, *, response_status):
        return json_bytes(data)


class PortalApi(NinjaAPI):
    def create_response(self, request, data, *, status=None, temporal_response=None):
        return api_headers(
            super().create_response(
                request, data, status=status, temporal_response=temporal_response
            )
        )

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        """Ninja's document, with every error documented as problem+json (and the errors
        every authenticated operation can meet added where a route does not name them)."""
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.setdefault("Problem", Problem.model_json_schema())
        problem = {"$ref": "#/components/schemas/Problem"}
        for path_item in schema["paths"].values():
            for method, operation in path_item.items():
                responses = operation.setdefault("responses", {})
                errors = COMMON_ERRORS + (CHANGE_ERRORS if method != "get" else ())
                if operation.get("security"):
                    for status in errors:
                        responses.setdefault(status, {"description": HTTPStatus(status).phrase})
                for status, response in responses.items():
                    if int(status) >= 400:
                        response["content"] = {PROBLEM_TYPE: {"schema": copy.deepcopy(problem)}}
        return schema


api = PortalApi(
    title="Virtual Cluster API",
    version="1",
    description=(
        "가상 클러스터 콘솔의 모든 작업을 같은 규칙·권한·메시지로. "
        "Authorization: Bearer vcp_… (API 토큰 페이지에서 발급). "
        "오류는 RFC 9457 application/problem+json, Accept-Language: en 이면 영어."
    ),
    auth=BearerToken(),
    renderer=OrjsonRenderer(),
    docs=LocalSwagger(),
    docs_url="/docs",
    openapi_url="/openapi.json",
    urls_namespace="api",
)


@api.exception_handler(RuleViolation)
def _refusal(request, exc):
    return problem_response(request, exc, api)


@api.exception_handler(NinjaValidationError)
def _invalid(request, exc):
    return problem_response(request, validation_problem(exc.errors), api)


@api.exception_handler(HttpError)
def _http_error(request, exc):
    """Ninja's own refusals: a body it cannot parse is invalid input like any other."""
    if exc.status_code in (400, 422):
        return problem_response(request, RequestInvalid(field="body", name="body"), api)
    refusal = RuleViolation()
    refusal.status = exc.status_code
    return problem_response(request, refusal, api)


@api.exception_handler(Http404)
def _not_found(request, exc):
    return problem_response(request, NotFound(), api)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return problem_response(request, TokenRequired(), api)


@api.exception_handler(Exception)
def _unexpected(request, exc):
    """A bug: logged with its traceback, a 500 problem+json without it (even with DEBUG)."""
    return guard.unexpected(request, exc)


for _module in (catalog, clusters, validation, spares, vms, operations, ssh_keys, webhooks):
    api.add_router("/", _module.router)


@csrf_exempt
def api_not_found(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    """A path under /api/ that names no route: the API's 404, not the console's page."""
    return problem_response(request, NotFound(), api)
