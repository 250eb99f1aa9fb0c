"""The ``vc`` CLI's HTTP side: JSON over ``urllib`` with the bearer token, and the exit code
of each way a call can fail (``vc_cli``'s docstring lists them).

The token goes only to the configured portal: a redirect is never followed (it is reported,
exit 5), so no answer can send the token to another host or over plain HTTP."""

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request

from vc_cli.text import say

EXIT_REFUSED, EXIT_USAGE, EXIT_AUTH, EXIT_NOT_FOUND, EXIT_SERVER, EXIT_TIMEOUT = 1, 2, 3, 4, 5, 6


class CliError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx stays an answer (``HTTPError``) instead of a new request carrying the token."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class Client:
    """JSON over HTTP with the bearer token; a problem document becomes a ``CliError``."""

    def __init__(self, url: str, token: str, language: str):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CliError(say("bad_url", url=url), EXIT_USAGE)
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token
        self.language = language

    def call(self, method: str, path: str, body=None, query=None, raw=False):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http(s) only, checked in __init__
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept-Language", self.language)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(request, timeout=60) as response:
                payload = response.read()
                status, content_type = response.status, response.headers.get("Content-Type")
        except urllib.error.HTTPError as error:
            raise _problem(error, url) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", None) or repr(error)
            raise CliError(f"{url}: {reason}", EXIT_SERVER) from None
        if raw:
            return payload.decode("utf-8", "replace")
        try:
            return json.loads(payload) if payload else None
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
            shown = content_type or "-"
            message = say("not_json", url=url, status=status, content_type=shown)
            raise CliError(message, EXIT_SERVER) from None

    def pages(self, path: str, query: dict):
        """Every item of a list, page after page; a page token answered twice is a server
        going round in circles (exit 5), not a reason to ask for ever."""
        query = dict(query, page_size=500)
        asked = set()
        while True:
            page = self.call("GET", path, query=query)
            yield from page["items"]
            token = page.get("next_page_token")
            if not token:
                return
            if token in asked:
                raise CliError(say("page_loop", url=self.base + path), EXIT_SERVER)
            asked.add(token)
            query["page_token"] = token


def _problem(error: urllib.error.HTTPError, url: str) -> CliError:
    """A refusal's message (the problem document's ``detail``, whatever else the body is)
    and its exit code: 401/403 → 3, 404 → 4, 5xx and redirects → 5, other 4xx → 1."""
    status = error.code
    if 300 <= status < 400:
        location = error.headers.get("Location") or "-"
        return CliError(say("redirect", url=url, status=status, location=location), EXIT_SERVER)
    try:
        problem = json.loads(error.read())
    except (ValueError, RecursionError, OSError, http.client.HTTPException):
        problem = None
    problem = problem if isinstance(problem, dict) else {}
    detail, field = problem.get("detail"), problem.get("field")
    message = detail if isinstance(detail, str) and detail else f"HTTP {status} {error.reason}"
    if isinstance(field, str) and field:
        message = f"{message} ({field})"
    code = {401: EXIT_AUTH, 403: EXIT_AUTH, 404: EXIT_NOT_FOUND}.get(status)
    if code is None:
        code = EXIT_SERVER if status >= 500 else EXIT_REFUSED
    return CliError(message, code)
