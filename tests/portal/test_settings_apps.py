"""The portal's settings install no test support: ``tests.*`` apps (the benchmarks) come only
from tests/settings.py and tests/bench/settings.py, whatever ``PORTAL_MODE`` says."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

SCRIPT = "import json, portal.settings as s; print(json.dumps(s.INSTALLED_APPS))"


@pytest.mark.parametrize("mode", ["production", "development"])
def test_portal_settings_install_no_tests_app(mode, tmp_path):
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(
        PORTAL_MODE=mode,
        SECRET_KEY="x" * 64,
        ALLOWED_HOSTS="127.0.0.1",
        PORTAL_VAR_DIR=str(tmp_path),
        PYTHONPATH=str(settings.BASE_DIR),
    )
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    apps = json.loads(result.stdout)
    assert "portal" in apps  # the settings were read
    assert [app for app in apps if app == "tests" or app.startswith("tests.")] == []
