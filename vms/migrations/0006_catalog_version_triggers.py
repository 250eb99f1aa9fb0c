"""The catalog's version (``vms.catalog_version``): its sequence, the function that raises it,
the statement-level triggers on the zones, the instance types and the offerings, and its row.

Before this migration a ``post_migrate`` receiver installed them, so ``sqlmigrate`` and a
schema-only restore lacked them. The SQL is frozen here as text. PostgreSQL only: on SQLite
(the demo) the version is never read, so the operation does nothing there and ``sqlmigrate``
shows nothing (``RunSQLOn``). Every statement replaces what a ``post_migrate`` may already
have installed.

The function writes the row back when it is missing: ``flush`` (a transactional test's
teardown) empties every table with one TRUNCATE, the version's row with the catalog's, and the
catalog's TRUNCATE trigger then writes a new number (as the ``post_migrate`` did after a flush).

Migrating back drops the triggers and the function and deletes the row, so that nothing is
kept while no trigger raises the number (read without its row, the version is None). It
leaves the sequence: the sequence is what remembers the numbers already handed out, and
applying this migration again goes on from there, never handing out one of them twice.
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


CATALOG = ("vms_zone", "vms_instancetype", "vms_fabricoffering")

POSTGRESQL = [
    "CREATE SEQUENCE IF NOT EXISTS vms_catalogversion_numbers",
    """CREATE OR REPLACE FUNCTION vms_catalogversion_raise() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE vms_catalogversion SET value = nextval('vms_catalogversion_numbers') WHERE id = 1;
  IF NOT FOUND THEN
    INSERT INTO vms_catalogversion (id, value) VALUES (1, nextval('vms_catalogversion_numbers'))
    ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value;
  END IF;
  RETURN NULL;
END $$""",
    *(
        statement
        for table in CATALOG
        for statement in (
            f"DROP TRIGGER IF EXISTS vms_catalogversion_raised ON {table}",
            f"""CREATE TRIGGER vms_catalogversion_raised
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}
FOR EACH STATEMENT EXECUTE FUNCTION vms_catalogversion_raise()""",
        )
    ),
    """INSERT INTO vms_catalogversion (id, value) VALUES (1, nextval('vms_catalogversion_numbers'))
ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value""",
]
POSTGRESQL_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS vms_catalogversion_raised ON {table}" for table in CATALOG),
    "DROP FUNCTION IF EXISTS vms_catalogversion_raise()",
    "DELETE FROM vms_catalogversion",
]


class Migration(migrations.Migration):
    dependencies = [("vms", "0005_catalog_version")]

    operations = [RunSQLOn("postgresql", POSTGRESQL, POSTGRESQL_REVERSE)]
