"""Request id, Korean-first language, current project, and one place that turns a refusal
(``RuleViolation``) into a page or an HTMX fragment instead of a 500."""

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import render
from django.utils import translation

from portal.foundation.errors import RuleViolation
from portal.foundation.request_ids import begin_ids, forget_ids


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        rid, token = begin_ids(request.headers.get("X-Request-ID"))
        request.request_id = rid
        try:
            response = self.get_response(request)
        finally:
            forget_ids(token)
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
        from portal.iam.projects import current_project

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
