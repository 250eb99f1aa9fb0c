"""``rundemo`` leaves nothing running behind it: a port in use is refused before the worker
and beat start, and a SIGKILLed rundemo takes them (and the worker's pool) down with it.

Each run carries a mark in its environment; "what is left running" is every process whose
environment holds it, read from /proc. Decided by state: poll until the processes are there
(or gone), with generous bounds for a loaded machine."""

import os
import signal
import socket
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.faults.harness import BASE_DIR, free_port, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds ``mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"VC_RUNDEMO_MARK={mark}".encode() not in (entry / "environ").read_bytes():
                continue
            status = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if status != "Z":
            found.append((int(entry.name), command))
    return found


@contextmanager
def rundemo(tmp_path, port):
    """A rundemo subprocess and its mark; whatever carries the mark is killed at the end
    (the test's own processes only), pass or fail."""
    mark = uuid.uuid4().hex
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")
    }
    env.update(
        VC_RUNDEMO_MARK=mark,
        PORTAL_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="portal.settings",
        SIMULATOR_STEP_SECONDS="0",
    )
    process = subprocess.Popen(
        [sys.executable, "manage.py", "rundemo", "--addrport", f"127.0.0.1:{port}"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield process, mark
    finally:
        for pid, _command in marked(mark):
            os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with rundemo(tmp_path, taken.getsockname()[1]) as (process, mark):
            _out, err = process.communicate(timeout=120)
            assert process.returncode != 0
            assert "이미 사용 중입니다" in err or "already in use" in err
            assert marked(mark) == []
            assert not (tmp_path / "portal.sqlite3").exists()  # not even migrated


def test_a_killed_rundemo_takes_its_worker_and_beat_with_it(tmp_path):
    with rundemo(tmp_path, free_port()) as (process, mark):

        def running(kind):
            return [pid for pid, command in marked(mark) if f"celery -A portal {kind}" in command]

        # rundemo migrates and seeds a fresh SQLite first: generous on a loaded machine.
        wait_until(lambda: running("worker") and running("beat"), 300, 0.2, "worker and beat")
        wait_until(lambda: len(running("worker")) >= 3, 120, 0.2, "the worker's pool")
        assert process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        wait_until(lambda: marked(mark) == [], 60, 0.2, "every child to end")
