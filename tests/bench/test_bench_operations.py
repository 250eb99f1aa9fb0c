"""``bench_operations``, the bulk actions' benchmark, is a development tool like the others:
absent in production, present in development, and it takes no database name."""

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from tests.bench.test_bench_tools import manage_commands


def test_bench_operations_is_a_development_command_only(tmp_path):
    production = manage_commands(
        tmp_path, PORTAL_MODE="production", SECRET_KEY="x", ALLOWED_HOSTS="x"
    )
    assert "migrate" in production and "bench_operations" not in production
    assert "bench_operations" not in manage_commands(tmp_path, PORTAL_MODE="development")
    bench = manage_commands(tmp_path, DJANGO_SETTINGS_MODULE="tests.bench.settings")
    assert "bench_operations" in bench


def test_bench_operations_takes_no_database_name():
    with pytest.raises(CommandError, match="unrecognized arguments"):
        call_command("bench_operations", "--database", settings.DATABASES["default"]["NAME"])
