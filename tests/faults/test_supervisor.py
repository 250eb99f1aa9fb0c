"""rundemo's supervisor (portal.supervisor) on plain processes: no database, no broker."""

import logging
import sys
import time

from portal.supervisor import Child, Supervisor
from tests.faults.harness import wait_until


def python(code):
    return [sys.executable, "-c", code]


def test_a_child_that_exits_is_restarted_with_a_log_line(caplog):
    child = Child("sleeper", python("import time; time.sleep(60)"))
    supervisor = Supervisor([child], interval=0.05).start()
    try:
        first = child.pid
        with caplog.at_level(logging.WARNING, logger="portal.supervisor"):
            child.process.kill()
            wait_until(lambda: child.pid != first and child.process.poll() is None, 5)
        assert child.restarts == 1
        assert f"sleeper (pid {first}) exited with status -9; restarting it" in caplog.text
    finally:
        supervisor.stop(timeout=2)
    assert child.process.poll() is not None  # stop() ends it


def test_a_child_that_keeps_dying_is_restarted_with_a_growing_delay():
    """A worker that exits at import (a file where its queue folder should be) must not be
    forked twice a second for as long as the fault lasts."""
    child = Child("crasher", python("raise SystemExit(1)"))
    supervisor = Supervisor([child], interval=0.05).start()
    try:
        time.sleep(3)
    finally:
        supervisor.stop(timeout=2)
    # 0.5 + 1 + 2 s of backoff fit in 3 s (plus interpreter starts): at most 3 restarts.
    assert 1 <= child.restarts <= 3


def test_a_worker_that_stops_consuming_is_restarted():
    ages = iter([None, 0.1])  # nothing consumed yet, then a fresh heartbeat
    child = Child("worker", python("import time; time.sleep(60)"), watch_heartbeat=True)
    supervisor = Supervisor(
        [child], heartbeat_age=lambda: next(ages, 0.1), heartbeat_max_age=0.3, interval=0.05
    ).start()
    try:
        first = child.pid
        wait_until(lambda: child.restarts == 1, 5)
        assert child.history == ["consumed nothing for too long"]
        time.sleep(0.5)
        assert child.restarts == 1 and child.pid != first  # the fresh heartbeat holds
    finally:
        supervisor.stop(timeout=2)


def test_a_booting_worker_gets_its_startup_grace_and_then_the_max_age():
    """A worker that has consumed nothing since its start is not a stalled one until the
    startup grace is over; once it has consumed, the (shorter) max age applies again."""
    clock = {"age": None}
    child = Child("worker", python("import time; time.sleep(60)"), watch_heartbeat=True)
    supervisor = Supervisor(
        [child], heartbeat_age=lambda: clock["age"], heartbeat_max_age=0.3, startup_grace=600
    )
    supervisor._spawn(child)
    try:
        child.started_at -= 5  # up for 5 s, nothing consumed: booting
        assert not supervisor._stalled(child)
        clock["age"] = 1.0  # consumed since its start, 1 s ago: stalled
        assert supervisor._stalled(child)
        clock["age"] = 100.0  # a stamp older than the worker: still booting
        assert not supervisor._stalled(child)
    finally:
        supervisor.stop(timeout=2)
