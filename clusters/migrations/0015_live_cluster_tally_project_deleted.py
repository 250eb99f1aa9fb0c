"""SQLite's live-cluster tally triggers, made safe for a project's deletion (and a flush).

``0014``'s SQLite trigger on a cluster's deletion appended a -1 delta even when the cluster's
project was going too: a flush (``DELETE FROM`` each table, in an order that varies with the
hash seed) left deltas of deleted projects behind, and the commit failed ("FOREIGN KEY
constraint failed"). Now the delta is appended only while the project exists, and a
project's deletion deletes its deltas, whichever of the two goes first. PostgreSQL's
triggers are unchanged: its flush truncates, which fires no row trigger.

The SQL is frozen here as text, SQLite's only (``RunSQLOn``). SQLite drops a table's
triggers when a migration rebuilds the table: a later migration that alters
``clusters_virtualcluster`` or ``portal_project`` on SQLite must install them again.
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


_OLD_WHILE_THE_PROJECT_EXISTS = (
    "INSERT INTO clusters_liveclustertally (project_id, delta)"
    " SELECT OLD.project_id, -1 WHERE OLD.status <> 'DELETED'"
    " AND EXISTS (SELECT 1 FROM portal_project WHERE id = OLD.project_id);"
)
_OLD = (  # 0014's
    "INSERT INTO clusters_liveclustertally (project_id, delta)"
    " SELECT OLD.project_id, -1 WHERE OLD.status <> 'DELETED';"
)

SQLITE = [
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_deleted",
    "CREATE TRIGGER clusters_liveclustertally_deleted AFTER DELETE ON clusters_virtualcluster"
    f" BEGIN {_OLD_WHILE_THE_PROJECT_EXISTS} END",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_project_deleted",
    "CREATE TRIGGER clusters_liveclustertally_project_deleted AFTER DELETE ON portal_project"
    " BEGIN DELETE FROM clusters_liveclustertally WHERE project_id = OLD.id; END",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_project_deleted",
    "DROP TRIGGER IF EXISTS clusters_liveclustertally_deleted",
    "CREATE TRIGGER clusters_liveclustertally_deleted AFTER DELETE ON clusters_virtualcluster"
    f" BEGIN {_OLD} END",
]


class Migration(migrations.Migration):
    dependencies = [("clusters", "0014_live_cluster_tally_triggers")]

    operations = [RunSQLOn("sqlite", SQLITE, SQLITE_REVERSE)]
