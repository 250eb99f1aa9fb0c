"""Request id, Korean-first language, current project, and one place that turns a refusal
(``RuleViolation``) into a page or an HTMX fragment instead of a 500."""

import contextvars
import logging
import uuid

from django.conf import settings
from django.shortcuts import render
from django.utils import translation

from portal.errors import RuleViolation

_request_id = contextvars.ContextVar("request_id", default="")


def current_request_id():
    return _request_id.get()


class RequestIdFilter(logging.Filter):
    def filter(self, record):
        record.request_id = _request_id.get() or "-"
        return True


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        rid = incoming if incoming.isalnum() and len(incoming) <= 32 else uuid.uuid4().hex
        request.request_id = rid
        token = _request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            _request_id.reset(token)
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
