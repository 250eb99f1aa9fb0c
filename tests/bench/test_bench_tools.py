"""The benchmark tools are development tools: a production deployment does not offer them, and
their scratch databases can only ever be ones they made."""

import os
import subprocess
import sys
from secrets import token_hex

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from tests.bench import scratch

BENCH_COMMANDS = (
    "bench_pages",
    "loadtest",
    "bench_metrics",
    "bench_operations",
    "bench_first_chart",
    "bench_fleet_pages",
    "bench_ingest_fleet",
    "bench_fleet",
)


def manage_commands(tmp_path, **env):
    """The command names ``manage.py help --commands`` lists under the given environment."""
    keep = ("PATH", "HOME", "LANG")
    result = subprocess.run(
        [sys.executable, "manage.py", "help", "--commands"],
        cwd=settings.BASE_DIR,
        env={
            **{k: os.environ[k] for k in keep if k in os.environ},
            **env,
            "PORTAL_VAR_DIR": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(result.stdout.split())


def test_production_settings_offer_no_bench_command(tmp_path):
    production = manage_commands(
        tmp_path, PORTAL_MODE="production", SECRET_KEY="x", ALLOWED_HOSTS="x"
    )
    assert "migrate" in production  # the listing itself worked
    assert production.isdisjoint(BENCH_COMMANDS)


def test_only_the_bench_settings_offer_the_bench_commands(tmp_path):
    development = manage_commands(tmp_path, PORTAL_MODE="development")
    assert "migrate" in development
    assert development.isdisjoint(BENCH_COMMANDS)
    bench = manage_commands(tmp_path, DJANGO_SETTINGS_MODULE="tests.bench.settings")
    assert bench.issuperset(BENCH_COMMANDS)


def database_exists(name):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def maintenance_dsn():
    db = settings.DATABASES["default"]
    return scratch.database_url(db, name="postgres")


@pytest.mark.postgres_only("scratch databases are PostgreSQL databases (tests.bench.scratch)")
@pytest.mark.django_db
@pytest.mark.parametrize("which", ["configured", "maintenance"])
def test_the_configured_database_is_refused_and_kept(which):
    configured = settings.DATABASES["default"]["NAME"]
    name = configured if which == "configured" else "postgres"
    with pytest.raises(scratch.NotAScratchDatabase):
        scratch.drop_scratch_database(name)
    assert database_exists(name)
    assert connection.settings_dict["NAME"] == configured


@pytest.mark.postgres_only("scratch databases are PostgreSQL databases (tests.bench.scratch)")
@pytest.mark.django_db
def test_a_scratch_looking_name_it_did_not_create_is_refused_and_kept():
    name = f"{scratch.PREFIX}{token_hex(scratch.SUFFIX_BYTES)}"
    assert scratch.is_scratch_name(name)
    with psycopg.connect(maintenance_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with pytest.raises(scratch.NotAScratchDatabase):
            scratch.drop_scratch_database(name)
        assert database_exists(name)
    finally:
        with psycopg.connect(maintenance_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}"')


@pytest.mark.parametrize(
    "name",
    ["postgres", "bench_vcportal", "vc_scratch_", "vc_scratch_0A1B2C3D4E5F", 'vc_scratch_0a"; x'],
)
def test_only_prefix_plus_hex_suffix_is_a_scratch_name(name):
    assert not scratch.is_scratch_name(name)


@pytest.mark.parametrize("command", BENCH_COMMANDS)
def test_no_command_takes_a_database_name(command):
    with pytest.raises(CommandError, match="unrecognized arguments"):
        call_command(command, "--database", settings.DATABASES["default"]["NAME"])


@pytest.mark.postgres_only("scratch databases are PostgreSQL databases (tests.bench.scratch)")
@pytest.mark.slow
def test_scratch_database_is_made_used_and_dropped():
    """In a process of its own: the helper points the default connection at a fresh scratch
    database, migrated, and drops exactly that one afterwards."""
    script = (
        "import django; django.setup()\n"
        "from django.db import connection\n"
        "from tests.bench.scratch import scratch_database\n"
        "original = connection.settings_dict['NAME']\n"
        "with scratch_database(keep=False, say=lambda text: None) as name:\n"
        "    assert connection.settings_dict['NAME'] == name\n"
        "    with connection.cursor() as cursor:\n"
        "        cursor.execute('SELECT count(*) FROM portal_role')\n"
        "    print(name)\n"
        "assert connection.settings_dict['NAME'] == original\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    name = result.stdout.split()[-1]
    assert scratch.is_scratch_name(name)
    with psycopg.connect(maintenance_dsn(), autocommit=True) as conn:
        left = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    assert left is None
