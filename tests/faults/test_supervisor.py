"""rundemo's supervisor (portal.processes.supervisor) on plain processes: no database, no broker."""

import logging
import sys

import pytest

from portal.processes import supervisor as supervisor_module
from portal.processes.supervisor import Child, Supervisor
from tests.faults.harness import wait_until


def python(code):
    return [sys.executable, "-c", code]


def test_a_child_that_exits_is_restarted_with_a_log_line(caplog):
    child = Child("sleeper", python("import time; time.sleep(60)"))
    supervisor = Supervisor([child], interval=0.05).start()
    try:
        first = child.pid
        with caplog.at_level(logging.WARNING, logger="portal.processes.supervisor"):
            child.process.kill()
            wait_until(lambda: child.pid != first and child.process.poll() is None, 5)
        assert child.restarts == 1
        assert f"sleeper (pid {first}) exited with status -9; restarting it" in caplog.text
    finally:
        supervisor.stop(timeout=2)
    assert child.process.poll() is not None  # stop() ends it


class Clock:
    """The supervisor's ``time.monotonic``, moved by the test: a delay is passed by moving
    it, not waited out, and the test drives the rounds (``check``) itself."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(supervisor_module, "time", clock)
    return clock


def test_a_child_that_keeps_dying_is_restarted_with_a_growing_delay(clock):
    """A worker that exits at import (a file where its queue folder should be) must not be
    forked twice a second for as long as the fault lasts: each quick death doubles the delay
    (0.5, 1, 2 s), and no round before the delay is over forks it."""
    child = Child("crasher", python("raise SystemExit(1)"))
    supervisor = Supervisor([child])
    supervisor._spawn(child)
    try:
        for restarts, delay in enumerate((0.5, 1.0, 2.0), start=1):
            process = child.process
            wait_until(lambda process=process: process.poll() is not None, 30)
            supervisor.check()
            assert child.restarts == restarts and child.restart_at == clock.now + delay
            clock.now = child.restart_at - 0.01
            supervisor.check()
            assert child.process is process  # not forked before its delay
            clock.now = child.restart_at
            supervisor.check()
            assert child.process is not process
    finally:
        supervisor.stop(timeout=2)


def test_a_worker_that_stops_consuming_is_restarted(clock):
    ages = iter([None, 0.1])  # nothing consumed yet, then a fresh heartbeat
    child = Child("worker", python("import time; time.sleep(60)"), watch_heartbeat=True)
    supervisor = Supervisor([child], heartbeat_age=lambda: next(ages, 0.1), heartbeat_max_age=0.3)
    supervisor._spawn(child)
    try:
        first = child.pid
        clock.now += 0.4  # up longer than the max age, nothing consumed
        supervisor.check()
        assert child.restarts == 1 and child.history == ["consumed nothing for too long"]
        supervisor.check()  # a stall is no crash: restarted at once
        assert child.pid != first
        clock.now += 0.4
        supervisor.check()
        assert child.restarts == 1  # the fresh heartbeat holds
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
