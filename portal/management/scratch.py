"""A throw-away PostgreSQL database for the benchmark commands (never the portal's own)."""

from contextlib import contextmanager

from django.db import connection


@contextmanager
def scratch_database(name, *, keep, say):
    """Create and migrate database ``name``, point the default connection at it, and drop it
    afterwards unless ``keep``."""
    creation = connection.creation
    original_name = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"] = {**connection.settings_dict.get("TEST", {}), "NAME": name}
    say(f"creating and migrating database {name} …")
    creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        if keep:
            say(f"kept database {connection.settings_dict['NAME']}")
        else:
            creation.destroy_test_db(original_name, verbosity=0)
