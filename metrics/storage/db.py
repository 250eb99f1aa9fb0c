"""What the storage modules share: the database they run on, and the instants they store.

A stored instant is an integer count of microseconds since the Unix epoch (``micros``), the
resolution of PostgreSQL's ``timestamptz`` and of Python's ``datetime``: the ingest endpoint
rounds a sample's ``ts`` once (``to_micros``), checks duplicates on that, and every write
path stores exactly that integer.
"""

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import DatabaseError, connection

UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
MICROS_PER_SECOND = 1_000_000


def is_postgresql() -> bool:
    """Partitions, COPY and prepared statements are PostgreSQL's; elsewhere (SQLite in the
    demo) plain ORM writes and deletes do the same job more slowly."""
    return connection.vendor == "postgresql"


def sqlstate(exc: DatabaseError) -> str | None:
    """The SQLSTATE of a wrapped psycopg error (None on other databases)."""
    return getattr(exc.__cause__, "sqlstate", None)


def to_micros(seconds: Iterable[float]) -> list[int]:
    """Unix seconds (JSON numbers) to stored instants, by C-level maps, not a Python loop.
    ``round(s * 1e6)`` can differ from the exactly rounded decimal by one
    microsecond near a half: what matters is that every path stores this same integer."""
    return list(map(round, map(float(MICROS_PER_SECOND).__mul__, seconds)))


def micros_of(moment: datetime) -> int:
    return (moment - UNIX_EPOCH) // MICROSECOND


def datetime_of(micros: int) -> datetime:
    return UNIX_EPOCH + timedelta(microseconds=micros)


def bucket_sql(column: str, unit: str) -> str:
    """SQL truncating ``column`` to its ``unit`` ("minute" or "hour"), in UTC."""
    if is_postgresql():
        return f"date_trunc('{unit}', {column})"
    # SQLite keeps datetimes as 'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC.
    # %% because the statement goes through Django's %s-parameter formatting (and, under
    # DEBUG, through ``sql % params`` for the query log).
    pattern = {"minute": "%%Y-%%m-%%d %%H:%%M:00", "hour": "%%Y-%%m-%%d %%H:00:00"}[unit]
    return f"strftime('{pattern}', {column})"


def param(moment: datetime):  # what the backend takes: a str or a datetime
    """A datetime as this database takes it as a query parameter."""
    return connection.ops.adapt_datetimefield_value(moment)
