"""English is complete: every string in the code and templates has a translation in the .po."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["portal", "clusters", "vms", "metrics", "templates", "locale"]


@pytest.mark.slow
def test_every_string_is_translated(tmp_path):
    for name in SOURCES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    # Re-extract from the sources as they are now, merging into a copy of the committed .po.
    subprocess.run(
        [sys.executable, "-m", "django", "makemessages", "-l", "en", "-v", "0"],
        cwd=tmp_path,
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )
    po = polib.pofile(str(tmp_path / "locale/en/LC_MESSAGES/django.po"))
    untranslated = [e.msgid for e in po if not e.obsolete and not e.translated()]
    assert untranslated == [], "untranslated strings (run makemessages and translate them)"
