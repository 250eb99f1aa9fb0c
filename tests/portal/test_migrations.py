"""Schema is the migrations': nothing of ours runs at ``post_migrate`` (the triggers, the
functions and the sequence are migrations' RunSQL, tested by what they do in
tests/clusters/test_tally.py), and a historical data
migration keeps its own frozen copy of what it needs: an old text gets its code whatever the
message says today, and that code is one the portal still knows.
"""

from importlib import import_module

import pytest
from django.apps import apps
from django.db.models.signals import post_migrate

from portal.foundation.errors import CapacityUnavailable, RuleViolation

OURS = {"portal", "clusters", "vms", "metrics"}


def test_post_migrate_runs_nothing_of_ours():
    receivers = {
        f"{receiver.__module__}.{receiver.__qualname__}"
        for config in apps.get_app_configs()
        for receiver in post_migrate._live_receivers(config)[0]
    }
    assert receivers  # Django's own (permissions, content types) are there
    assert not {name for name in receivers if name.split(".")[0] in OURS}


@pytest.mark.parametrize("migration", ["vms.0002_errors_as_codes", "clusters.0003_errors_as_codes"])
def test_the_codes_stored_for_old_texts_are_codes_the_portal_knows(migration):
    """A row the migration named by a code is shown by that code's class, not the generic one."""
    app, name = migration.split(".")
    frozen = import_module(f"{app}.migrations.{name}")
    for code in [*frozen.CODE_OF_TEXT.values(), frozen.GENERIC]:
        assert RuleViolation.from_stored(code).code == code


class Stored:
    """A row of the historical model as the data migration sees it (only these fields)."""

    def __init__(self, last_error: str):
        self.last_error, self.error_code = last_error, ""

    def save(self, update_fields: list[str]) -> None:
        assert update_fields == ["error_code"]


class HistoricalApps:
    """The ``apps`` a ``RunPython`` step is given, holding ``rows`` (stored before codes)."""

    def __init__(self, rows: list[Stored]):
        self.rows = rows

    def get_model(self, app_label: str, model_name: str):
        rows = self.rows

        class Objects:
            @staticmethod
            def exclude(last_error: str) -> list[Stored]:
                return [row for row in rows if row.last_error != last_error]

        return type(model_name, (), {"objects": Objects})


@pytest.mark.parametrize("migration", ["vms.0002_errors_as_codes", "clusters.0003_errors_as_codes"])
def test_an_old_text_gets_its_code_whatever_the_message_says_today(migration, monkeypatch):
    monkeypatch.setattr(CapacityUnavailable, "default_message", "자원이 부족합니다")
    app, name = migration.split(".")
    frozen = import_module(f"{app}.migrations.{name}")
    rows = [
        Stored("가용 영역의 자원이 부족하여 시작할 수 없습니다. 잠시 후 다시 시도하세요"),
        Stored(" 컴퓨트 백엔드 오류로 작업을 완료하지 못했습니다\n"),
        Stored("자원이 부족합니다"),  # today's text: never stored before codes
    ]
    frozen.last_error_to_code(app, "Model")(HistoricalApps(rows), None)
    assert [row.error_code for row in rows] == [
        "capacity_unavailable",
        "backend_error",
        "rule_violation",
    ]
