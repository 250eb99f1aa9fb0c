"""``timestamptz`` values parsed by psycopg's C loader, where Django parses them in Python.

Django gives each PostgreSQL connection a subclass of psycopg's pure-Python
``TimestamptzLoader`` (it replaces each value's tzinfo with the connection's time zone),
so every timestamp a query returns went through a regular expression: one per value,
fifty on a list page, thousands on a metrics read. The portal's connections run in UTC
(``USE_TZ``, no ``TIME_ZONE`` in ``DATABASES``), and there psycopg's C loader already
returns what Django's does: the same instant, with ``datetime.timezone.utc``. So on a UTC
connection the C loader is registered back; anywhere else (another zone, psycopg without
its C extension) Django's stays. The C loader is found through psycopg's public adapters map:
``psycopg.adapters`` holds the C class in place of the Python one wherever psycopg has it.
"""

import datetime

import psycopg
from django.db.backends.signals import connection_created
from psycopg import postgres
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.types.datetime import TimestamptzLoader

TIMESTAMPTZ = postgres.types["timestamptz"].oid
# psycopg's C loader, or None where psycopg runs without its C extension.
C_LOADER = psycopg.adapters.get_loader(TIMESTAMPTZ, Format.TEXT)
if C_LOADER is TimestamptzLoader:
    C_LOADER = None


class UtcTimestamptzLoader(Loader):
    """psycopg's C loader, behind the ``timezone`` attribute Django's cursor compares with
    its own before it registers its loader again (a C class takes no attribute, and no
    subclass). ``load`` is the C loader's own, bound: no Python runs per value."""

    timezone = datetime.UTC

    def __init__(self, oid: int, context: AdaptContext | None = None):
        super().__init__(oid, context)
        self.load = C_LOADER(oid, context).load  # type: ignore[method-assign,misc]

    def load(self, data: Buffer) -> datetime.datetime:  # pragma: no cover - shadowed above
        raise NotImplementedError


def use_c_loader(sender, connection, **kwargs) -> None:
    """``connection_created``: on a PostgreSQL connection in UTC, the C loader."""
    if connection.vendor != "postgresql" or C_LOADER is None:
        return
    raw = connection.connection
    if connection.timezone is datetime.UTC and raw.info.parameter_status("TimeZone") == "UTC":
        raw.adapters.register_loader(TIMESTAMPTZ, UtcTimestamptzLoader)


connection_created.connect(use_c_loader, dispatch_uid="portal.speed.pgtime")
