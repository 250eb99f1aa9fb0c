"""English is complete: every string in the code and templates has a translation in the .po,
and the .po holds no string the code no longer uses (makemessages would keep it as ``#~``)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["portal", "clusters", "vms", "metrics", "templates", "locale"]


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """The committed .po merged with the strings of the sources as they are now."""
    tmp_path = tmp_path_factory.mktemp("messages")
    for name in SOURCES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    # Re-extract from the sources as they are now, merging into a copy of the committed .po.
    subprocess.run(
        [sys.executable, "-m", "django", "makemessages", "-l", "en", "-v", "0"],
        cwd=tmp_path,
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )
    return polib.pofile(str(tmp_path / "locale/en/LC_MESSAGES/django.po"))


@pytest.mark.slow
def test_every_string_is_translated(extracted):
    untranslated = [e.msgid for e in extracted if not e.obsolete and not e.translated()]
    assert untranslated == [], "untranslated strings (run makemessages and translate them)"


@pytest.mark.slow
def test_no_translation_is_left_over(extracted):
    """A msgid no string of the code has any more: delete its entry from the .po."""
    obsolete = [e.msgid for e in extracted.obsolete_entries()]
    assert obsolete == [], "strings the code no longer uses (delete them from the .po)"
