"""RFC 9457 problem documents: how every refusal under ``/api/`` is answered — the REST API
(``portal.api``) and the agents' endpoints (``metrics.views.agent``) alike.

``application/problem+json`` with ``type``, ``title`` (the status's phrase), ``status``, a
stable ``code`` and ``detail`` (the message), plus ``field`` or ``permission`` where the
refusal is about one. The console ignores Accept-Language on purpose (Korean unless the
switcher says otherwise); under ``/api/`` the callers are programs and people in their own
locale, so Accept-Language picks the language: Korean by default, English when asked for.
The words are the typed error's own (``portal.foundation.errors``): a refusal reads the same
in the API as on the page.
"""

from http import HTTPStatus

from django.conf import settings
from django.http import HttpRequest
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header

from portal.foundation.errors import NulCharacter, PermissionRequired, RuleViolation
from portal.foundation.errors.api import RequestInvalid

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


def problem(status: int, code: str, detail: str) -> dict:
    """The members every problem document has."""
    return {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "code": code,
        "detail": detail,
    }


def problem_body(exc: RuleViolation) -> dict:
    """What a client gets for a refusal: its status, stable code, message, and the field or
    permission it is about."""
    body = problem(exc.status, exc.code, exc.message)
    field = getattr(exc, "field", None)
    if field:
        # What the schema or the guard refuses is named as sent: already the API's name.
        as_sent = isinstance(exc, (NulCharacter, RequestInvalid))
        body["field"] = field if as_sent else BODY_FIELDS.get(field, field)
    if isinstance(exc, PermissionRequired):
        body["permission"] = exc.permission
    return body
