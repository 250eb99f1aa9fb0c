"""The catalog's version retires: what it let a process keep (the list filters' zones) bought
at most 0.2 ms and 7 % of a page (docs/performance.md, 2026-12-07), under the bar a speed
mechanism has to clear. The triggers on the catalog's tables, their function, the sequence
and the version's table go. PostgreSQL held the triggers, the function and the sequence; on
SQLite only the table existed. The SQL is frozen here as text (``vms.0006`` made them);
migrating back makes them again, the row included."""

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

RETIRE = [
    *(f"DROP TRIGGER IF EXISTS vms_catalogversion_raised ON {table}" for table in CATALOG),
    "DROP FUNCTION IF EXISTS vms_catalogversion_raise()",
    "DROP SEQUENCE IF EXISTS vms_catalogversion_numbers",
]
RESTORE = [
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
        f"""CREATE TRIGGER vms_catalogversion_raised
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}
FOR EACH STATEMENT EXECUTE FUNCTION vms_catalogversion_raise()"""
        for table in CATALOG
    ),
    """INSERT INTO vms_catalogversion (id, value) VALUES (1, nextval('vms_catalogversion_numbers'))
ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value""",
]


class Migration(migrations.Migration):
    dependencies = [("catalog", "0001_catalog_from_vms"), ("vms", "0007_catalog_to_its_app")]

    operations = [
        RunSQLOn("postgresql", RETIRE, RESTORE),
        migrations.DeleteModel(name="CatalogVersion"),
    ]
