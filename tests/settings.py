"""Test settings: the real ones, with the simulator at full speed and tasks run eagerly.

Set before ``portal.settings`` is read, which is why they live here and not in conftest.py.
Tests that need a real worker (tests/clusters/test_worker.py) switch eager mode off.
"""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("SIMULATOR_STEP_SECONDS", "0")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# The real tier's guests and networks never share names with a demo's on the same libvirtd.
os.environ.setdefault("LIBVIRT_NAME_PREFIX", "vctest")
os.environ.setdefault("LIBVIRT_PORTAL_ID", "vc-test-portal")
# ...nor their management network's address: two networks of one host cannot hold one block.
os.environ.setdefault("LIBVIRT_PORTAL_URL", "http://10.0.3.2:8000")

from portal.settings import *  # noqa: F403

# The benchmark tools' app (portal.settings never installs a tests.* app): their tests need it.
INSTALLED_APPS = [*INSTALLED_APPS, "tests.bench"]  # noqa: F405

# Hashing demo passwords with PBKDF2 costs ~0.3 s a user; tests don't need that strength.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # Without DATABASE_URL the suite runs on SQLite: on a file, as the demo does, not in
    # SQLite's shared in-memory database, where a second thread's write (the live server's,
    # a worker's) fails at once with "database table is locked" instead of waiting its turn.
    _name = f"{os.environ.get('TEST_DATABASE_NAME') or 'test_vc'}-{os.getpid()}.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / _name)}  # noqa: F405
