"""Races and lock order: real threads, each on its own connection, contending for rows
locked with ``SELECT … FOR UPDATE``. SQLite locks the whole database, not rows, so every
test here is marked ``postgres_only``."""

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(
                pytest.mark.postgres_only(
                    "row-lock races: SQLite locks the whole database, not rows"
                    " (no SELECT … FOR UPDATE)"
                )
            )
