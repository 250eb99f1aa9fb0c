"""RFC 9457 problem documents for the REST API's refusals, in the caller's language: the
document itself and the language are ``portal.foundation.problems``'s (the agents' endpoints
answer the same); here, the answer through ninja and a schema error as a typed refusal.
"""

from django.http import HttpRequest, HttpResponse

from portal.foundation.errors import RuleViolation
from portal.foundation.errors.api import RequestInvalid
from portal.foundation.problems import PROBLEM_TYPE, activate_api_language, problem_body


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
