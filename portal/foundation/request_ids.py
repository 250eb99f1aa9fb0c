"""The ids of the request (or of the task) being served: the server's own, made for every
request, and the client's ``X-Request-ID``, kept for correlation and never trusted. Log lines
(``RequestIdFilter``), audit events and queued tasks carry them."""

import contextvars
import logging
import re
import uuid
from typing import Any, NamedTuple


class RequestIds(NamedTuple):
    server: str  # made here for every request: what logs and audit events are keyed on
    client: str  # what the client sent as X-Request-ID, kept for correlation, never trusted


_request_ids = contextvars.ContextVar("request_ids", default=RequestIds("", ""))  # noqa: B039 - immutable
CLIENT_ID_MAX = 64


def request_ids() -> RequestIds:
    return _request_ids.get()


def current_request_id() -> str:
    return _request_ids.get().server


# The server ids ``begin_ids`` makes (uuid4().hex); nothing else is taken for one.
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


def begin_ids(client: Any) -> tuple[str, contextvars.Token[RequestIds]]:
    """A new server id for a request, kept with what its client sent; the id and the token
    that ``forget_ids`` ends it with."""
    server = uuid.uuid4().hex
    return server, _request_ids.set(RequestIds(server, _client_id(client)))


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
