"""The catalog's version: a number that every change to the catalog's tables raises, read
with each request's user (``portal.iam.auth.read_with_user``), so that what a process keeps of
the catalog (a list filter's zones) is used only while the catalog is as it was read.

Statement-level triggers on the zones, the instance types and the offerings raise it inside
the changing transaction, whatever makes the change: the admin, a queryset ``update()``, SQL
by hand, a TRUNCATE. The number and the change it counts become visible together, at commit.
So a process that sees the new number reads the new rows. A process that read the new rows
under the old number keeps them under that number, and reads them again once it sees the
new one.

The number comes from a sequence, which never hands one out twice: a change rolled back took
its number with it, so what was kept under that number (by the process that made the change,
reading its own transaction) is never taken for a later catalog's. The sequence, the function
and the triggers are schema, installed by migration ``vms.0006_catalog_version_triggers``; the
function writes the number's row back if it is missing, so a ``flush`` (whose TRUNCATE fires
the triggers) raises the number too: nothing kept before a flush is used after it. PostgreSQL
only: on the demo's SQLite the number reads as None, and nothing is kept.
"""

from collections.abc import Callable, Hashable
from typing import Any

from portal.catalog.models import CatalogVersion
from portal.iam.auth import read_with
from portal.speed.kept import Kept

VERSION = CatalogVersion._meta.db_table
# The name the number is read with the user under (``portal.iam.auth.read_with``).
READ_AS = "catalog_version"
# How many things are kept at most: the store is emptied when full.
MOST_KEPT = 256

# The number, as the scalar subquery read with the user's row (null without its row).
VERSION_SQL = f"SELECT value FROM {VERSION} WHERE id = 1"  # noqa: S608 - names from the models and constants; values are parameters


def current(user) -> int | None:
    """The catalog's number as read with ``user`` on this request; None where it was not
    (the demo's SQLite, a user not loaded from a session)."""
    return read_with(user, READ_AS)


_KEPT = Kept(most=MOST_KEPT)


def kept(key: Hashable, version: int | None, read: Callable[[], Any]) -> Any:
    """What ``read()`` returns, kept per process under ``key`` and the catalog's
    ``version``: read again when the version has changed, every time when it is None."""
    if version is None:
        return read()
    found = _KEPT.get((key, version))
    return found if found is not None else _KEPT.keep((key, version), read())
