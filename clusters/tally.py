"""The live clusters' tally (``LiveClusterTally``): the triggers that keep it, its merge,
and the total the cluster list reads from it.

The triggers are (re)installed and the tally recounted after every ``migrate`` (and every
``flush``), from ``ClustersConfig.ready``: SQLite drops a table's triggers whenever a
migration rebuilds the table, and rows written while no trigger stood must still count.
"""

from django.db import connections, transaction
from django.db.models import F, Func, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce

from clusters.models import ClusterStatus, LiveClusterTally, VirtualCluster

TALLY = LiveClusterTally._meta.db_table
CLUSTERS = VirtualCluster._meta.db_table
DELETED = ClusterStatus.DELETED.value
# Compaction and recount replace rows: one at a time (a transaction-level advisory lock).
_LOCK = 0x7661_6C79  # "valy"

_POSTGRES_INSTALL = [
    f"""
CREATE OR REPLACE FUNCTION {TALLY}_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.status <> '{DELETED}' THEN
    INSERT INTO {TALLY} (project_id, delta) VALUES (OLD.project_id, -1);
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.status <> '{DELETED}' THEN
    INSERT INTO {TALLY} (project_id, delta) VALUES (NEW.project_id, 1);
  END IF;
  RETURN NULL;
END $$""",
    f"DROP TRIGGER IF EXISTS {TALLY}_rows ON {CLUSTERS}",
    f"""CREATE TRIGGER {TALLY}_rows AFTER INSERT OR DELETE ON {CLUSTERS}
FOR EACH ROW EXECUTE FUNCTION {TALLY}_count()""",
    f"DROP TRIGGER IF EXISTS {TALLY}_moves ON {CLUSTERS}",
    f"""CREATE TRIGGER {TALLY}_moves AFTER UPDATE OF status, project_id ON {CLUSTERS}
FOR EACH ROW WHEN ((OLD.status = '{DELETED}') IS DISTINCT FROM (NEW.status = '{DELETED}')
                   OR OLD.project_id IS DISTINCT FROM NEW.project_id)
EXECUTE FUNCTION {TALLY}_count()""",
]

_SQLITE_INSERT_OLD = (
    f"INSERT INTO {TALLY} (project_id, delta) SELECT OLD.project_id, -1"
    f" WHERE OLD.status <> '{DELETED}';"
)
_SQLITE_INSERT_NEW = (
    f"INSERT INTO {TALLY} (project_id, delta) SELECT NEW.project_id, 1"
    f" WHERE NEW.status <> '{DELETED}';"
)
_SQLITE_INSTALL = [
    f"DROP TRIGGER IF EXISTS {TALLY}_inserted",
    f"CREATE TRIGGER {TALLY}_inserted AFTER INSERT ON {CLUSTERS} BEGIN {_SQLITE_INSERT_NEW} END",
    f"DROP TRIGGER IF EXISTS {TALLY}_deleted",
    f"CREATE TRIGGER {TALLY}_deleted AFTER DELETE ON {CLUSTERS} BEGIN {_SQLITE_INSERT_OLD} END",
    f"DROP TRIGGER IF EXISTS {TALLY}_moves",
    f"""CREATE TRIGGER {TALLY}_moves AFTER UPDATE OF status, project_id ON {CLUSTERS}
WHEN (OLD.status = '{DELETED}') IS NOT (NEW.status = '{DELETED}')
     OR OLD.project_id IS NOT NEW.project_id
BEGIN {_SQLITE_INSERT_OLD} {_SQLITE_INSERT_NEW} END""",
]

# One statement on PostgreSQL: what it deletes and what it writes are of the same snapshot,
# so a delta committed meanwhile is neither deleted nor counted twice.
_POSTGRES_MERGE = f"""
WITH gone AS (DELETE FROM {TALLY} RETURNING project_id, delta)
INSERT INTO {TALLY} (project_id, delta)
SELECT project_id, SUM(delta) FROM gone GROUP BY project_id HAVING SUM(delta) <> 0"""
_POSTGRES_RECOUNT = f"""
WITH gone AS (DELETE FROM {TALLY} RETURNING 1)
INSERT INTO {TALLY} (project_id, delta)
SELECT project_id, COUNT(*) FROM {CLUSTERS} WHERE status <> '{DELETED}' GROUP BY project_id"""
# SQLite: one writer at a time (the portal begins IMMEDIATE), two statements are as safe.
_SQLITE_MERGE = [
    f"CREATE TEMP TABLE tally_merged AS SELECT project_id, SUM(delta) AS delta FROM {TALLY}"
    " GROUP BY project_id HAVING SUM(delta) <> 0",
    f"DELETE FROM {TALLY}",
    f"INSERT INTO {TALLY} (project_id, delta) SELECT project_id, delta FROM tally_merged",
    "DROP TABLE tally_merged",
]
_SQLITE_RECOUNT = [
    f"DELETE FROM {TALLY}",
    f"INSERT INTO {TALLY} (project_id, delta) SELECT project_id, COUNT(*) FROM {CLUSTERS}"
    f" WHERE status <> '{DELETED}' GROUP BY project_id",
]


def _run(using: str, postgres: list[str] | str, sqlite: list[str]) -> None:
    connection = connections[using]
    statements = [postgres] if isinstance(postgres, str) else postgres
    with transaction.atomic(using=using), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
        for sql in statements if connection.vendor == "postgresql" else sqlite:
            cursor.execute(sql)


def install(using: str = "default") -> None:
    """Create or replace the triggers that keep the tally, then recount it."""
    _run(using, _POSTGRES_INSTALL, _SQLITE_INSTALL)
    recount(using)


def recount(using: str = "default") -> None:
    """Replace every delta with each project's count of live clusters."""
    _run(using, _POSTGRES_RECOUNT, _SQLITE_RECOUNT)


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


def on_migrate(sender, using="default", **kwargs) -> None:
    """``post_migrate``: the triggers back in place and the tally true."""
    install(using)
