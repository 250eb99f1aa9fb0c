"""Input no view should have to check, refused in one place before any view reads it.

* A NUL character (U+0000) in any query parameter, form field or JSON string: no field may
  hold one (PostgreSQL cannot store or compare it). The API answers 400 problem+json. In
  the console, a list's filter with one is ignored with a message (as a list ignores any bad
  filter value, ``portal.web.listing``: a NUL cannot be typed, only come from a broken or forged
  link, and the list is still what the user came for); a posted form with one is refused
  with the error next to the form (HTMX: the form stays as it was) or, on a page that shows
  its form's errors itself (``nul_as_form_error``), as that form's error.
* Under ``/api/``: a body past ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413, a body sent without
  a ``Content-Length`` (chunked) a 411 — WSGI would hand the view an empty body; under the REST API
  (``/api/v1/``) a body is JSON sent as ``application/json`` (else 415); and every error
  answered under ``/api/`` is problem+json, whatever raised it (a 404 or 405 the router
  makes, an exception no handler expected: a 500 that names the request id, no traceback).
"""

import logging

import orjson
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import QueryDict

from portal.api.common import json_response
from portal.foundation.errors import NotFound, NulCharacter, NulFilterIgnored, RuleViolation
from portal.foundation.errors.api import (
    BodyTooLarge,
    HttpRefusal,
    JsonRequired,
    LengthRequired,
    MethodNotAllowed,
    ServerError,
)
from portal.foundation.problems import PROBLEM_TYPE, activate_api_language, problem_body
from portal.foundation.request_ids import current_request_id
from portal.web.middleware import render_refusal

NUL = "\x00"
API_PREFIX = "/api/"
REST_PREFIX = "/api/v1/"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
log = logging.getLogger(__name__)


def field_name(key: str) -> str:
    """A field's name fit to show (its own NULs written as \\0)."""
    return key.replace(NUL, "\\0")[:100]


def nul_in_pairs(data: QueryDict) -> str | None:
    """The first field of a query string or form whose name or a value holds a NUL."""
    for key, values in data.lists():
        if NUL in key or any(NUL in value for value in values):
            return field_name(key)
    return None


def nul_in_json(document) -> str | None:
    """The key (or ``body``) of the first JSON string, key or value, holding a NUL."""
    stack = [("body", document)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, str):
            if NUL in value:
                return name
        elif isinstance(value, dict):
            for key, item in value.items():
                if NUL in key:
                    return field_name(key)
                stack.append((key, item))
        elif isinstance(value, list):
            stack.extend((name, item) for item in value)
    return None


def nul_as_form_error(view):
    """Mark a view that shows an input refusal as its own form's error: the refusal is
    handed to it on ``request.input_refusal`` instead of answered here."""
    view.nul_as_form_error = True
    return view


# ---------------------------------------------------------------------------------------------
# The API


def _problem(request, refusal: RuleViolation):
    activate_api_language(request)
    response = json_response(problem_body(refusal), status=refusal.status)
    response["Content-Type"] = PROBLEM_TYPE
    return response


def _body_refusal(request) -> RuleViolation | None:
    if "HTTP_TRANSFER_ENCODING" in request.META and not request.META.get("CONTENT_LENGTH"):
        return LengthRequired()
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if limit is not None and length > limit:
        return BodyTooLarge(max=limit)
    try:
        body = request.body
    except RequestDataTooBig:
        return BodyTooLarge(max=limit)
    if not body or not request.path.startswith(REST_PREFIX):
        return None
    if (request.content_type or "").lower() != "application/json":
        return JsonRequired()
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # the schema's own 422 names the body
    field = nul_in_json(document)
    return NulCharacter(field=field, name=field) if field else None


def api_refusal(request) -> RuleViolation | None:
    """Why an API request is refused before routing, or None."""
    if request.path.startswith(REST_PREFIX):
        field = nul_in_pairs(request.GET)
        if field:
            return NulCharacter(field=field, name=field)
    if request.method in BODY_METHODS:
        return _body_refusal(request)
    return None


def as_problem(request, response):
    """An error answered under /api/ in another shape (HTML, plain text, ninja's own JSON)
    made problem+json with the same status (405 keeps its Allow header)."""
    if response.status_code < 400 or response.get("Content-Type", "").startswith(PROBLEM_TYPE):
        return response
    status = response.status_code
    refusal: RuleViolation
    if status == 404:
        refusal = NotFound()
    elif status == 405:
        refusal = MethodNotAllowed(method=request.method)
    elif status == 413:
        refusal = BodyTooLarge(max=settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)
    elif status >= 500:
        refusal = ServerError(request_id=current_request_id() or "-")
    else:
        refusal = HttpRefusal(status)
    problem = _problem(request, refusal)
    if "Allow" in response:
        problem["Allow"] = response["Allow"]
    return problem


def unexpected(request, exc: Exception):
    """An exception no handler expected: logged with its traceback, answered as a 500
    problem+json that names the request id (never the traceback)."""
    log.error("unexpected API error", exc_info=(type(exc), exc, exc.__traceback__))
    return _problem(request, ServerError(request_id=current_request_id() or "-"))


class ApiGuardMiddleware:
    """First in the chain under /api/: refuses what no API view should read, and answers
    every error as problem+json."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        refusal = api_refusal(request)
        if refusal is not None:
            return _problem(request, refusal)
        # An exception a view outside ninja raised has been made a response by Django by
        # now (Http404 a 404, anything else a logged 500): here it becomes a problem.
        return as_problem(request, self.get_response(request))


# ---------------------------------------------------------------------------------------------
# The console


class ConsoleNulMiddleware:
    """NUL in the console's input (after sessions, messages and the user are known)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path.startswith(API_PREFIX):
            return None
        field = nul_in_pairs(request.GET)
        if field and request.method in ("GET", "HEAD"):
            kept = QueryDict(mutable=True)
            for key, values in request.GET.lists():
                if NUL not in key and not any(NUL in value for value in values):
                    kept.setlist(key, values)
            kept._mutable = False
            request.GET = kept
            messages.warning(request, NulFilterIgnored(name=field).message)
            return None
        if not field and request.method == "POST":
            field = nul_in_pairs(request.POST)
        if not field:
            return None
        refusal = NulCharacter(field=field, name=field)
        if getattr(view_func, "nul_as_form_error", False):
            request.input_refusal = refusal
            return None
        return render_refusal(request, refusal)
