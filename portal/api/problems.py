"""RFC 9457 problem documents for every refusal, in the caller's language.

The console ignores Accept-Language on purpose (Korean unless the switcher says otherwise);
the API is read by programs and people in their own locale, so here Accept-Language picks
the language: Korean by default, English when asked for. The words are the typed error's
own (``portal.errors``): a refusal reads the same in the API as on the page.
"""

from http import HTTPStatus

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header

from portal.errors import NulCharacter, PermissionRequired, RuleViolation
from portal.errors.api import RequestInvalid

PROBLEM_TYPE = "application/problem+json"
# The console's form fields that the API's bodies name by id.
BODY_FIELDS = {"zone": "zone_id", "instance_type": "instance_type_id", "cluster": "cluster_id"}


def api_language(request: HttpRequest) -> str:
    """The first supported language of Accept-Language by quality, else Korean."""
    supported = {code for code, _name in settings.LANGUAGES}
    for tag, _quality in parse_accept_lang_header(request.headers.get("Accept-Language", "")):
        base = tag.split("-")[0].lower()
        if base in supported:
            return base
    return settings.LANGUAGE_CODE


def activate_api_language(request: HttpRequest) -> None:
    language = api_language(request)
    translation.activate(language)
    request.LANGUAGE_CODE = language


def problem_body(exc: RuleViolation) -> dict:
    """What a client gets for a refusal: its status, stable code, message, and the field or
    permission it is about."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(exc.status).phrase,
        "status": exc.status,
        "code": exc.code,
        "detail": exc.message,
    }
    field = getattr(exc, "field", None)
    if field:
        # What the schema or the guard refuses is named as sent: already the API's name.
        as_sent = isinstance(exc, (NulCharacter, RequestInvalid))
        body["field"] = field if as_sent else BODY_FIELDS.get(field, field)
    if isinstance(exc, PermissionRequired):
        body["permission"] = exc.permission
    return body


def problem_response(request: HttpRequest, exc: RuleViolation, api) -> HttpResponse:
    activate_api_language(request)
    response = api.create_response(request, problem_body(exc), status=exc.status)
    response["Content-Type"] = PROBLEM_TYPE
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def validation_problem(errors: list[dict]) -> RequestInvalid:
    """The first schema error as a typed refusal naming its field (``body.name`` → name)."""
    first = errors[0] if errors else {}
    sources = ("body", "query", "path", "header", "payload")
    location = [str(part) for part in first.get("loc", ()) if part not in sources]
    field = location[0] if location else ""
    return RequestInvalid(field=field or None, name=field or "-")
