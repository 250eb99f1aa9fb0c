"""Keep the Celery worker and beat of ``rundemo`` running.

A child that exits (SIGKILL, a crash on a broken broker folder) is started again, with a
log line. A worker that is alive but no longer consumes (its heartbeat, ``portal.tasks.heartbeat``,
older than ``WORKER_HEARTBEAT_MAX_AGE_SECONDS`` while it has been up at least that long) is
killed and started again: a prefork pool whose children were SIGKILLed can wedge that way.
In production systemd (``Restart=always``) and a probe on ``/healthz`` do the same job.

Children end with the supervising process, however it ends (SIGKILL included): each is
started with ``PR_SET_PDEATHSIG`` = SIGKILL (Linux), and a prefork worker's pool processes
have the same from Celery. The kernel sends the signal when the *thread* that forked the
child ends, so the watcher thread (which forks restarts) lives until ``stop`` has ended the
children.
"""

import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any

from portal.foundation.broker import BROKER_ERRORS

log = logging.getLogger(__name__)

# A child that dies sooner than STEADY_SECONDS after its start (a broken broker folder makes
# the worker exit at import) is restarted after a delay that doubles up to MAX_BACKOFF_SECONDS,
# instead of being forked twice a second for as long as the fault lasts.
STEADY_SECONDS = 10.0
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
PR_SET_PDEATHSIG = 1


LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with(parent: int) -> None:
    """In a forked child before exec: be SIGKILLed when the parent (thread) ends; end now if
    the parent ``parent`` is already gone (it died between the fork and this call)."""
    if LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
        os._exit(127)


@dataclass
class Child:
    """One supervised process: its name, its command, and what became of it."""

    name: str
    argv: list[str]
    watch_heartbeat: bool = False
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = 0.0
    restart_at: float | None = None
    history: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


class Supervisor:
    """Start ``children``, restart any that exits or (for ``watch_heartbeat``) stalls.

    Each child gets its own session, so stopping one (or the whole stack) kills its own
    process group and nothing else, and a Ctrl-C on the terminal reaches only rundemo.
    """

    def __init__(
        self,
        children: list[Child],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
        output: Callable[[Child], IO[Any] | int | None] | None = None,
        heartbeat_age: Callable[[], float | None] | None = None,
        heartbeat_max_age: float | None = None,
        startup_grace: float = 0.0,
        interval: float = 0.5,
    ):
        self.children = children
        self.env = env
        self.cwd = cwd
        self.output = output
        self.heartbeat_age = heartbeat_age
        self.heartbeat_max_age = heartbeat_max_age
        # How long a (re)started worker has to consume its first task, if longer than the
        # max age: on a loaded machine a worker's boot may take longer than a stall may.
        self.startup_grace = startup_grace
        self.interval = interval
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._checking = threading.Lock()
        self._thread: threading.Thread | None = None

    def child(self, name: str) -> Child:
        return next(child for child in self.children if child.name == name)

    def start(self) -> "Supervisor":
        for child in self.children:
            self._spawn(child)
        self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self._thread.start()
        return self

    def _spawn(self, child: Child) -> None:
        stdout = self.output(child) if self.output else None
        child.process = subprocess.Popen(  # noqa: S603 - the demo's own argument lists
            child.argv,
            env=self.env,
            cwd=self.cwd,
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout is not None else None,
            start_new_session=True,
            preexec_fn=partial(die_with, os.getpid()) if sys.platform == "linux" else None,
        )
        child.started_at = time.monotonic()

    def _watch(self) -> None:
        while not self._stopping.wait(self.interval):
            with self._checking:
                if not self._stopping.is_set():
                    self.check()
        self._stopped.wait()  # the children this thread forked die with it: not before stop

    def check(self) -> None:
        """One round: restart what exited, and a worker whose heartbeat went stale."""
        for child in self.children:
            if self._stopping.is_set():
                return
            if child.restart_at is not None:
                if time.monotonic() >= child.restart_at:
                    child.restart_at = None
                    self._spawn(child)
                continue
            process = child.process
            if process is None:
                continue  # not started yet
            code = process.poll()
            if code is not None:
                _kill_group(process, signal.SIGKILL)  # what it left behind, if anything
                self._restart(child, f"exited with status {code}")
            elif child.watch_heartbeat and self._stalled(child):
                _kill_group(process, signal.SIGKILL)
                process.wait()
                self._restart(child, "consumed nothing for too long", crashed=False)

    def _stalled(self, child: Child) -> bool:
        """No heartbeat for ``heartbeat_max_age`` while the worker has been up that long; a
        worker that has consumed nothing since its (re)start gets ``startup_grace`` if that
        is longer (its boot, not a stall)."""
        if self.heartbeat_age is None or self.heartbeat_max_age is None:
            return False
        up = time.monotonic() - child.started_at
        if up < self.heartbeat_max_age:
            return False  # give a fresh worker the time to consume its first task
        try:
            age = self.heartbeat_age()
        except BROKER_ERRORS:
            return False  # the broker is down: the worker reconnects by itself, wait for it
        consumed_since_start = age is not None and age < up
        if not consumed_since_start and up < self.startup_grace:
            return False
        return age is None or age > self.heartbeat_max_age

    def _restart(self, child: Child, why: str, *, crashed: bool = True) -> None:
        """Start ``child`` again: now, or after a backoff if it crashed soon after starting."""
        if not crashed or time.monotonic() - child.started_at >= STEADY_SECONDS:
            child.backoff = 0.0
        else:
            child.backoff = min(MAX_BACKOFF_SECONDS, 2 * child.backoff or FIRST_BACKOFF_SECONDS)
        log.warning(
            "%s (pid %s) %s; restarting it in %.1fs", child.name, child.pid, why, child.backoff
        )
        child.history.append(why)
        child.restarts += 1
        child.restart_at = time.monotonic() + child.backoff

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM every child's group, wait up to ``timeout``, SIGKILL what is left."""
        self._stopping.set()
        with self._checking:  # no restart is half done
            self._stop_children(timeout)
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _stop_children(self, timeout: float) -> None:
        started = [child.process for child in self.children if child.process is not None]
        for process in started:
            _kill_group(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(process, signal.SIGKILL)
                process.wait()


def _kill_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass  # already gone
