"""/healthz checks that a worker consumes, not only that the broker answers, and the
filesystem broker's state stays under var/."""

import os
import subprocess
import sys
import time

import pytest
from django.urls import reverse

from portal.celery import app
from portal.foundation.broker import ensure_folders
from portal.processes import heartbeat
from tests.faults.harness import BASE_DIR, broker, filesystem_options

pytestmark = pytest.mark.django_db


@pytest.fixture
def not_eager(tmp_path):
    """A filesystem broker of this test's own, tasks really sent: a worker is expected."""
    with broker(app, "filesystem://", filesystem_options(tmp_path / "var")):
        ensure_folders()
        yield


def test_healthz_fails_until_a_worker_has_consumed(client, not_eager):
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json()["broker"] == "ok"
    assert response.json()["worker"].startswith("error")

    heartbeat.touch()
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "broker": "ok",
        "worker": "ok",
        "cache": "ok",
    }


def test_healthz_fails_when_the_worker_stopped_consuming(client, not_eager, settings):
    heartbeat.touch()
    stale = time.time() - settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS - 5
    os.utime(heartbeat._file(), (stale, stale))
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert "no task consumed" in response.json()["worker"]


def test_the_filesystem_broker_keeps_all_its_state_under_var(tmp_path):
    """kombu writes its exchange tables to ./control unless told otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELERY_BROKER")}
    env.update(PORTAL_VAR_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="portal.settings")
    script = (
        "import django; django.setup(); from django.conf import settings; "
        "print(repr(settings.CELERY_BROKER_TRANSPORT_OPTIONS))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=BASE_DIR, capture_output=True, text=True
    )
    options = eval(out.stdout)  # noqa: S307 - our own repr of a dict of str
    folders = [options[key] for key in ("data_folder_in", "processed_folder", "control_folder")]
    assert all(folder.startswith(str(tmp_path / "var" / "celery")) for folder in folders)


def test_no_runtime_state_is_committed_and_all_of_it_is_ignored():
    git = ["git", "-C", str(BASE_DIR)]
    if subprocess.run([*git, "rev-parse"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    assert (
        subprocess.run([*git, "ls-files", "control"], capture_output=True, text=True).stdout == ""
    )
    runtime = [
        "var/portal.sqlite3",
        "var/celery/queue/1_x.celery.msg",
        "control/celery.exchange",
        "celerybeat-schedule",
        ".hypothesis/examples",
        "staticfiles/app.css",
    ]
    ignored = subprocess.run(
        [*git, "check-ignore", "--no-index", *runtime], capture_output=True, text=True
    ).stdout.split()
    assert sorted(ignored) == sorted(runtime)
