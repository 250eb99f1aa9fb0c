"""The triggers that keep the live clusters' tally (``clusters.tally``), and a recount.

Before this migration a ``post_migrate`` receiver installed them, so ``sqlmigrate`` and a
schema-only restore lacked them. The SQL is frozen here as text (table names, the 삭제됨
status's value), one list per database: PostgreSQL's runs only on PostgreSQL and SQLite's
only on SQLite (``RunSQLOn``), and ``sqlmigrate`` shows the one for the database it is asked
about. Every statement replaces what a ``post_migrate`` may already have installed, and the
recount makes the tally true again whatever was written while no trigger stood.

SQLite drops a table's triggers whenever a migration rebuilds the table: a later migration
that alters ``clusters_virtualcluster`` must install them again (the SQLite tests of
``tests/clusters/test_tally.py`` fail until it does).
"""

from django.db import migrations


class RunSQLOn(migrations.RunSQL):
    """``RunSQL`` for one database vendor only: a no-op, and nothing in ``sqlmigrate``, on
    any other."""

    def __init__(self, vendor, sql, reverse_sql):
        super().__init__(sql, reverse_sql)
        self.vendor = vendor

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        return name, args, {**kwargs, "vendor": self.vendor}

    def describe(self):
        return f"Raw SQL operation on {self.vendor} only"

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


# Each project's live clusters count +1 and -1 rows: a row that becomes live or stops being
# live (삭제됨, deleted, or moved to another project) writes its delta.
POSTGRESQL = [
    # As clusters.tally.merge does: one rewrite of the tally at a time.
    "SELECT pg_advisory_xact_lock(1986096249)",
    """CREATE OR REPLACE FUNCTION clusters_liveclustertally_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.status <> 'DELETED' THEN
    INSERT INTO clusters_liveclustertally (project_id, delta) VALUES (OLD.project_id, -1);
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.status <> 'DELETED' THEN
    INSERT INTO clusters_liveclustertally (project_id, delta) VALUES (NEW.project_id, 1);
  END IF;
  RETURN NULL;
END $$""",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_rows ON clusters_virtualcluster",
    """CREATE TRIGGER clusters_liveclustertally_rows
AFTER INSERT OR DELETE ON clusters_virtualcluster
FOR EACH ROW EXECUTE FUNCTION clusters_liveclustertally_count()""",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_moves ON clusters_virtualcluster",
    """CREATE TRIGGER clusters_liveclustertally_moves
AFTER UPDATE OF status, project_id ON clusters_virtualcluster
FOR EACH ROW WHEN ((OLD.status = 'DELETED') IS DISTINCT FROM (NEW.status = 'DELETED')
                   OR OLD.project_id IS DISTINCT FROM NEW.project_id)
EXECUTE FUNCTION clusters_liveclustertally_count()""",
    """WITH gone AS (DELETE FROM clusters_liveclustertally RETURNING 1)
INSERT INTO clusters_liveclustertally (project_id, delta)
SELECT project_id, COUNT(*) FROM clusters_virtualcluster WHERE status <> 'DELETED'
GROUP BY project_id""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_moves ON clusters_virtualcluster",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_rows ON clusters_virtualcluster",
    "DROP FUNCTION IF EXISTS clusters_liveclustertally_count()",
]

_OLD = (
    "INSERT INTO clusters_liveclustertally (project_id, delta)"
    " SELECT OLD.project_id, -1 WHERE OLD.status <> 'DELETED';"
)
_NEW = (
    "INSERT INTO clusters_liveclustertally (project_id, delta)"
    " SELECT NEW.project_id, 1 WHERE NEW.status <> 'DELETED';"
)
SQLITE = [
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_inserted",
    "CREATE TRIGGER clusters_liveclustertally_inserted AFTER INSERT ON clusters_virtualcluster"
    f" BEGIN {_NEW} END",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_deleted",
    "CREATE TRIGGER clusters_liveclustertally_deleted AFTER DELETE ON clusters_virtualcluster"
    f" BEGIN {_OLD} END",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_moves",
    f"""CREATE TRIGGER clusters_liveclustertally_moves
AFTER UPDATE OF status, project_id ON clusters_virtualcluster
WHEN (OLD.status = 'DELETED') IS NOT (NEW.status = 'DELETED')
     OR OLD.project_id IS NOT NEW.project_id
BEGIN {_OLD} {_NEW} END""",
    "DELETE FROM clusters_liveclustertally",
    """INSERT INTO clusters_liveclustertally (project_id, delta)
SELECT project_id, COUNT(*) FROM clusters_virtualcluster WHERE status <> 'DELETED'
GROUP BY project_id""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_moves",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_deleted",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_inserted",
]


class Migration(migrations.Migration):
    dependencies = [("clusters", "0013_live_cluster_tally")]

    operations = [
        RunSQLOn("postgresql", POSTGRESQL, POSTGRESQL_REVERSE),
        RunSQLOn("sqlite", SQLITE, SQLITE_REVERSE),
    ]
