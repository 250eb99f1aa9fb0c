"""The live clusters' tally (``LiveClusterTally``): its merge, and the total the cluster list
reads from it.

Triggers on the clusters table keep it, whatever writes the table: each row that becomes live
or stops being live (삭제됨, deleted, moved to another project) writes its project's delta.
They are schema, installed by migration ``clusters.0014_live_cluster_tally_triggers`` (which
also recounts). SQLite drops a table's triggers whenever a migration rebuilds the table: a
migration that alters the clusters table must install them again.
"""

from django.db import connections, transaction
from django.db.models import F, Func, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce

from clusters.models import LiveClusterTally

TALLY = LiveClusterTally._meta.db_table
# Compaction (and migration 0014's recount) replaces rows: one at a time (a transaction-level
# advisory lock).
_LOCK = 0x7661_6C79  # "valy"

# One statement on PostgreSQL: what it deletes and what it writes are of the same snapshot,
# so a delta committed meanwhile is neither deleted nor counted twice.
_POSTGRES_MERGE = f"""
WITH gone AS (DELETE FROM {TALLY} RETURNING project_id, delta)
INSERT INTO {TALLY} (project_id, delta)
SELECT project_id, SUM(delta) FROM gone GROUP BY project_id HAVING SUM(delta) <> 0"""  # noqa: S608 - names from the models and constants; values are parameters
# SQLite: one writer at a time (the portal begins IMMEDIATE), two statements are as safe.
_SQLITE_MERGE = [
    f"CREATE TEMP TABLE tally_merged AS SELECT project_id, SUM(delta) AS delta FROM {TALLY}"  # noqa: S608 - names from the models and constants; values are parameters
    " GROUP BY project_id HAVING SUM(delta) <> 0",
    f"DELETE FROM {TALLY}",  # noqa: S608 - names from the models and constants; values are parameters
    f"INSERT INTO {TALLY} (project_id, delta) SELECT project_id, delta FROM tally_merged",  # noqa: S608 - names from the models and constants; values are parameters
    "DROP TABLE tally_merged",
]


def _run(using: str, postgres: list[str] | str, sqlite: list[str]) -> None:
    connection = connections[using]
    statements = [postgres] if isinstance(postgres, str) else postgres
    with transaction.atomic(using=using), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
        for sql in statements if connection.vendor == "postgresql" else sqlite:
            cursor.execute(sql)


def merge(using: str = "default") -> None:
    """Merge each project's deltas into one row (none for a project at zero): beat's job,
    so the sum the list reads stays a row or a few per project."""
    _run(using, _POSTGRES_MERGE, _SQLITE_MERGE)


def live_total(project: int, projects: tuple | None):
    """The count of ``project``'s live clusters as an expression, within ``projects`` (the
    projects the reader may list; None: all), as the cluster list's total."""
    deltas = LiveClusterTally.objects.filter(project_id=project)
    if projects is not None:
        deltas = deltas.filter(project_id__in=projects)
    # SUM as a plain function, not the Sum aggregate: in .values() that would GROUP BY.
    summed = Func(F("delta"), function="SUM", output_field=IntegerField())
    return Coalesce(Subquery(deltas.order_by().values(n=summed)), Value(0))
