"""Request id, Korean-first language, current project, and one place that turns a refusal
(``RuleViolation``) into a page or an HTMX fragment instead of a 500."""

import contextvars
import logging
import re
import uuid
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import render
from django.utils import translation

from portal.errors import RuleViolation


class RequestIds(NamedTuple):
    server: str  # made here for every request: what logs and audit events are keyed on
    client: str  # what the client sent as X-Request-ID, kept for correlation, never trusted


_request_ids = contextvars.ContextVar("request_ids", default=RequestIds("", ""))  # noqa: B039 - immutable
CLIENT_ID_MAX = 64


def request_ids() -> RequestIds:
    return _request_ids.get()


def current_request_id() -> str:
    return _request_ids.get().server


# The server ids this middleware makes (uuid4().hex); nothing else is taken for one.
_SERVER_ID = re.compile(r"[0-9a-f]{32}")


def carried_ids() -> list[str] | None:
    """What a task queued now carries to its worker: the ids of the request (or of the task)
    that queued it; None outside both (beat's schedule)."""
    ids = _request_ids.get()
    return [ids.server, ids.client] if ids.server else None


def adopt_ids(carried: Any) -> contextvars.Token[RequestIds] | None:
    """Run a task under the ids it was queued with, so its log lines and audit events carry
    the request that caused it. A message's headers come from whoever could publish: anything
    but ids as this module makes them is ignored (None: nothing was set)."""
    if not (isinstance(carried, list) and len(carried) == 2):
        return None
    server, client = carried
    if not (isinstance(server, str) and _SERVER_ID.fullmatch(server)):
        return None
    return _request_ids.set(RequestIds(server, _client_id(client)))


def forget_ids(token: contextvars.Token[RequestIds]) -> None:
    _request_ids.reset(token)


def _client_id(incoming: Any) -> str:
    # A client's id may be anything (forged, reused, another tenant's): never our key.
    if not (isinstance(incoming, str) and incoming.isascii() and incoming.isprintable()):
        return ""
    return incoming[:CLIENT_ID_MAX]


class RequestIdFilter(logging.Filter):
    def filter(self, record):
        record.request_id = _request_ids.get().server or "-"
        return True


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        rid = uuid.uuid4().hex
        request.request_id = rid
        token = _request_ids.set(RequestIds(rid, _client_id(request.headers.get("X-Request-ID"))))
        try:
            response = self.get_response(request)
        finally:
            _request_ids.reset(token)
        response["X-Request-ID"] = rid
        return response


class KoreanFirstLocaleMiddleware:
    """Korean unless the user chose English with the switcher; Accept-Language is ignored."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.supported = {code for code, _name in settings.LANGUAGES}

    def __call__(self, request):
        language = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME, settings.LANGUAGE_CODE)
        if language not in self.supported:
            language = settings.LANGUAGE_CODE
        translation.activate(language)
        request.LANGUAGE_CODE = language
        response = self.get_response(request)
        response.headers.setdefault("Content-Language", language)
        return response


class CurrentProjectMiddleware:
    """``request.project``: the project chosen in the switcher, among those the user may see."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from portal.projects import current_project

        request.project = current_project(request)
        return self.get_response(request)


class RuleViolationMiddleware:
    """A refusal that escaped a view becomes its message with the right status code."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, RuleViolation):
            return None
        return render_refusal(request, exception)


def render_refusal(request, exc):
    """The refusal as a full page, or for HTMX as a flash message swapped into ``#flash``."""
    context = {"error": exc.message, "code": exc.code}
    if getattr(request, "htmx", False):
        response = render(request, "portal/refusal.html#flash", context, status=exc.status)
        response["HX-Retarget"] = "#flash"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render(request, "portal/refusal.html", context, status=exc.status)


class ConsoleErrorPageMiddleware:
    """A page that is not found or not allowed is the console's 404/403 page (its base
    template, its tone), also with ``DEBUG`` on, where Django would show its technical page
    (with it off, Django's own handlers render the same templates).
    The API answers problem+json itself (``portal.api.guard``) and is left alone."""

    TEMPLATES = {404: "404.html", 403: "403.html"}

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        # A path no URL matches never reaches a view, so process_exception never sees it.
        if (
            settings.DEBUG
            and response.status_code == 404
            and getattr(request, "resolver_match", None) is None
            and not _is_api(request)
            and response.get("Content-Type", "").startswith("text/html")
        ):
            return render(request, self.TEMPLATES[404], status=404)
        return response

    def process_exception(self, request, exception):
        if _is_api(request):
            return None
        if isinstance(exception, Http404):
            return render(request, self.TEMPLATES[404], status=404)
        if isinstance(exception, PermissionDenied):
            return render(request, self.TEMPLATES[403], status=403)
        return None


def _is_api(request) -> bool:
    return request.path_info.startswith("/api/")
