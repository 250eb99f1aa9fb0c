"""The ``vc`` CLI's HTTP side: JSON over ``urllib`` with the bearer token, and the exit code
of each way a call can fail (``portal.cli``'s docstring lists them)."""

import json
import urllib.error
import urllib.parse
import urllib.request

EXIT_REFUSED, EXIT_USAGE, EXIT_AUTH, EXIT_NOT_FOUND, EXIT_SERVER, EXIT_TIMEOUT = 1, 2, 3, 4, 5, 6


class CliError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class Client:
    """JSON over HTTP with the bearer token; a problem document becomes a ``CliError``."""

    def __init__(self, url: str, token: str, language: str):
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token
        self.language = language

    def call(self, method: str, path: str, body=None, query=None, raw=False):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept-Language", self.language)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise _problem(error) from None
        except (urllib.error.URLError, OSError) as error:
            raise CliError(f"{url}: {getattr(error, 'reason', error)}", EXIT_SERVER) from None
        if raw:
            return payload.decode()
        return json.loads(payload) if payload else None

    def pages(self, path: str, query: dict):
        """Every item of a list, page after page."""
        query = dict(query, page_size=500)
        while True:
            page = self.call("GET", path, query=query)
            yield from page["items"]
            if not page.get("next_page_token"):
                return
            query["page_token"] = page["next_page_token"]


def _problem(error: urllib.error.HTTPError) -> CliError:
    try:
        problem = json.loads(error.read())
        message = problem.get("detail") or str(error)
        if problem.get("field"):
            message = f"{message} ({problem['field']})"
    except ValueError:
        message = str(error)
    status = error.code
    code = {401: EXIT_AUTH, 403: EXIT_AUTH, 404: EXIT_NOT_FOUND}.get(status)
    if code is None:
        code = EXIT_SERVER if status >= 500 else EXIT_REFUSED
    return CliError(message, code)
