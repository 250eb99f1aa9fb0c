"""timestamptz values read by psycopg's C loader on the portal's UTC connections: the
same values Django's own loader gives, and the loader Django's cursors keep."""

import datetime

import pytest
from django.db import connection
from psycopg.pq import Format

from portal.speed.pgtime import C_LOADER, TIMESTAMPTZ, UtcTimestamptzLoader

pytestmark = [
    pytest.mark.skipif(C_LOADER is None, reason="psycopg without C"),
    pytest.mark.postgres_only("psycopg's timestamptz loader: SQLite's values are Django's text"),
]

TEXTS = [
    "2026-12-05 18:00:00+00",
    "2026-12-05 18:00:00.123456+00",
    "2026-03-29 01:30:00.5+09",  # another offset: the same instant, in UTC
    "1999-12-31 23:59:59.999999-08",
    "2024-02-29 00:00:00+00",
]


def read(sql: str) -> list:
    with connection.cursor() as cursor:
        cursor.execute(sql, TEXTS)
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db
def test_a_utc_connection_reads_timestamps_with_the_c_loader():
    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(TIMESTAMPTZ, Format.TEXT)
    assert loader is UtcTimestamptzLoader
    values = " UNION ALL ".join(["SELECT %s::timestamptz"] * len(TEXTS))
    fast = read(values)
    # The same texts parsed by Python, as Django's loader would have.
    expected = [datetime.datetime.fromisoformat(text + ":00") for text in TEXTS]
    assert fast == expected
    assert all(value.tzinfo is datetime.UTC for value in fast)


@pytest.mark.django_db
def test_a_cursor_keeps_the_c_loader():
    connection.ensure_connection()
    with connection.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(TIMESTAMPTZ, Format.TEXT)
    assert loader is UtcTimestamptzLoader
