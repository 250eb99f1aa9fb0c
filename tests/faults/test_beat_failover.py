"""One beat at a time (``portal.processes.beat_lock``): of two beats on one database, one
schedules and the other waits; SIGKILL the first and the second schedules; a beat whose
database session is cut stops scheduling (exits) instead of running beside a new holder."""

import os
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from portal.processes import beat_lock
from tests.faults.harness import BASE_DIR, HANDS_A_POSTGRES_URL, celery_env
from tests.waiting import wait_until

BOOT = 120  # a Django + Celery boot on a loaded 2-core machine; decided by the logs
CHECK = 0.2
SENT = "Sending due task"


class Beat:
    def __init__(self, name, broker_url, tmp_path):
        self.log = tmp_path / f"{name}.log"
        var = tmp_path / name
        var.mkdir()
        env = celery_env(
            broker_url,
            var,
            BEAT_LOCK_CHECK_SECONDS=CHECK,
            WORKER_HEARTBEAT_SECONDS=0.5,
            RECONCILE_EVERY_SECONDS=1,
        )
        command = [sys.executable, "-m", "celery", "-A", "portal", "beat", "--loglevel=INFO",
                   "--schedule", str(var / "celerybeat-schedule")]  # fmt: skip
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                command, cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def text(self):
        return self.log.read_text(errors="replace")

    def schedules(self):
        return "this beat schedules" in self.text()

    def waits(self):
        return "this one waits" in self.text()

    def sent_while_waiting(self):
        """A task sent before this beat took the lock (none may be)."""
        text = self.text()
        return SENT in text.split("this beat schedules")[0]

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def lock_holders():
    """Backends holding the schedule's advisory lock on the test database."""
    high, low = beat_lock.LOCK_KEY >> 32, beat_lock.LOCK_KEY & 0xFFFFFFFF
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s AND objid = %s AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            [high, low],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def beats(redis_server, tmp_path):
    redis_server.flush()
    started = []

    def start(name):
        beat = Beat(name, redis_server.url, tmp_path)
        started.append(beat)
        return beat

    yield start
    for beat in started:
        beat.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@HANDS_A_POSTGRES_URL
def test_of_two_beats_one_schedules_and_the_other_takes_over_when_it_dies(beats):
    first = beats("first")
    wait_until(first.schedules, BOOT, what="the first beat to take the lock")
    wait_until(lambda: SENT in first.text(), BOOT, what="the first beat to send a task")
    second = beats("second")
    wait_until(second.waits, BOOT, what="the second beat to wait")
    assert len(lock_holders()) == 1
    # It keeps waiting, sending nothing, while the first schedules on.
    sent = first.text().count(SENT)
    wait_until(lambda: first.text().count(SENT) > sent + 2, BOOT, what="the first to go on")
    assert not second.schedules()
    assert SENT not in second.text()

    first.process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    first.process.wait(timeout=10)
    wait_until(second.schedules, BOOT, what="the second beat to take over")
    took = time.monotonic() - killed
    wait_until(lambda: SENT in second.text(), BOOT, what="the second beat to send a task")
    assert not second.sent_while_waiting()
    assert len(lock_holders()) == 1
    print(f"takeover after SIGKILL: {took:.1f} s")  # the figure for the performance log


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@HANDS_A_POSTGRES_URL
def test_a_beat_whose_session_is_cut_stops_instead_of_scheduling_beside_another(beats):
    beat = beats("cut")
    wait_until(beat.schedules, BOOT, what="the beat to take the lock")
    (holder,) = lock_holders()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [holder])
    assert beat.process.wait(timeout=BOOT) == beat_lock.LOST_EXIT_CODE
    assert "the schedule's lock is lost" in beat.text()
    assert lock_holders() == []


def test_on_one_machine_the_lock_is_a_flock_one_process_at_a_time(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    mine = beat_lock.try_lock({}, postgres=False)
    assert mine is not None and mine.check()
    assert beat_lock.try_lock({}, postgres=False) is None  # another open file: refused
    mine.file.close()  # the holder gone (its process ended)
    assert beat_lock.try_lock({}, postgres=False) is not None
    assert os.path.exists(tmp_path / "beat.lock")
