"""Scratch PostgreSQL databases for the benchmark commands: made here, named here, dropped here.

A benchmark fills a database with tens of thousands of rows and drops it afterwards. The only
database this module will drop is one it created itself, in this process, under a name it drew
itself (``vc_scratch_`` and 12 random hex digits). No name comes from the command line or the
settings, and creating never replaces an existing database (``CREATE DATABASE`` fails on a
taken name), so no option or alias can point a benchmark at the portal's data.
"""

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from secrets import token_hex
from urllib.parse import quote

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

PREFIX = "vc_scratch_"
SUFFIX_BYTES = 6
_SCRATCH_NAME = re.compile(rf"{PREFIX}[0-9a-f]{{{2 * SUFFIX_BYTES}}}")
# Names created by this process and not dropped yet: the only ones drop_scratch_database takes.
_created: set[str] = set()


class NotAScratchDatabase(CommandError):
    """Asked to drop a database this helper did not create (a CommandError, so a command
    prints it as an error, not a traceback)."""


def is_scratch_name(name: str) -> bool:
    """Whether ``name`` has the form of a name this module draws."""
    return _SCRATCH_NAME.fullmatch(name) is not None


def create_scratch_database() -> str:
    """Create an empty database under a fresh scratch name and return the name."""
    if connection.vendor != "postgresql":
        raise CommandError("scratch databases are PostgreSQL ones: set DATABASE_URL=postgres://…")
    name = PREFIX + token_hex(SUFFIX_BYTES)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
    _created.add(name)
    return name


def drop_scratch_database(name: str) -> None:
    """Drop ``name`` if this process created it; refuse (and drop nothing) otherwise."""
    if not is_scratch_name(name) or name not in _created:
        raise NotAScratchDatabase(f"{name!r} is not a scratch database this run created")
    if connection.settings_dict["NAME"] == name:
        raise NotAScratchDatabase(f"{name!r} is still the default connection's database")
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE {connection.ops.quote_name(name)}")
    _created.discard(name)


def _point_default_at(name: str) -> None:
    """Make ``name`` the default connection's database (pooled connections to the old one
    are closed: a pool is bound to the database it was opened on)."""
    connection.close()
    connection.close_pool()
    connection.settings_dict["NAME"] = name
    settings.DATABASES[connection.alias]["NAME"] = name


@contextmanager
def scratch_database(*, keep: bool, say: Callable[[str], None]) -> Iterator[str]:
    """A fresh, migrated scratch database as the default connection's for the ``with`` block;
    afterwards the connection is pointed back and the database dropped unless ``keep``."""
    original = connection.settings_dict["NAME"]
    name = create_scratch_database()
    say(f"creating and migrating database {name} …")
    try:
        _point_default_at(name)
        call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)
        yield name
    finally:
        _point_default_at(original)
        if keep:
            say(f"kept database {name}")
        else:
            drop_scratch_database(name)


def database_url(db: dict | None = None, *, name: str | None = None) -> str:
    """``postgres://`` URL of ``db`` (the default connection's settings), for the processes a
    bench starts and for psycopg; ``name`` overrides the database."""
    db = connection.settings_dict if db is None else db
    auth = quote(db["USER"] or "") + (":" + quote(db["PASSWORD"]) if db["PASSWORD"] else "")
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{name or db['NAME']}"
