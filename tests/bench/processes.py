"""The servers a benchmark starts (gunicorn, a Celery worker) and the CPU they spend."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection

from tests.bench.scratch import database_url


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gunicorn_command(port: int, workers: int, threads: int, keep_alive: int) -> list[str]:
    """gunicorn serving the portal on 127.0.0.1:``port`` with gthread workers."""
    return [
        sys.executable, "-m", "gunicorn", "portal.wsgi:application",
        "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers),
        "--worker-class", "gthread",
        "--threads", str(threads),
        "--keep-alive", str(keep_alive),
        "--timeout", "60",
        "--log-level", "warning",
    ]  # fmt: skip


def serve_ingest(children, workers: int, threads: int, say) -> tuple[str, int]:
    """gunicorn serving the portal on a free loopback port for the ingest benches, on the
    current (scratch) database, DEBUG off; returns its (host, port). The per-token rate bound
    is lifted (the benches measure throughput; a request still pays its one cache operation),
    and ``CACHE_URL`` is passed on as set: Redis as in production, or each process's memory."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "METRICS_RATE_PER_MINUTE": str(10**9),
    }
    server = children.spawn(
        gunicorn_command(port, workers, threads, keep_alive=30), "gunicorn", env
    )
    children.wait_listening(server, "gunicorn", port)
    say(f"gunicorn on 127.0.0.1:{port} ({workers} workers x {threads} threads)")
    return "127.0.0.1", port


def celery_worker_command(name: str, concurrency: int = 2) -> list[str]:
    """A prefork Celery worker of the portal, quiet, without the cluster chatter."""
    return [
        sys.executable, "-m", "celery", "-A", "portal", "worker",
        "--pool=prefork", f"--concurrency={concurrency}",
        "--without-mingle", "--without-gossip", "--loglevel=WARNING",
        f"--hostname={name}@%h",
    ]  # fmt: skip


class Children:
    """Processes a bench starts, each in a process group of its own (so stopping one stops
    its workers too) and logging to ``<workdir>/<name>.log``."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.running = []

    def spawn(self, command: list[str], name: str, env: dict[str, str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "w")  # lives as long as the child
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.running.append((process, log))
        return process

    def log_tail(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text()[-3000:]

    def wait_listening(self, process: subprocess.Popen, name: str, port: int) -> None:
        """Until ``port`` accepts connections; a child that exits or takes a minute fails."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise CommandError(
                        f"{name} did not listen on {port}:\n{self.log_tail(name)}"
                    ) from None
                time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM each process group, SIGKILL what is left after 10 s."""
        for process, _log in self.running:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process, log in self.running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()
        self.running = []

    def pids(self) -> list[int]:
        """The children and all their descendants (gunicorn's and Celery's workers)."""
        pids = []
        for process, _log in self.running:
            try:
                parent = psutil.Process(process.pid)
                pids += [parent.pid, *(p.pid for p in parent.children(recursive=True))]
            except psutil.NoSuchProcess:
                continue
        return pids


@contextmanager
def children_in_tempdir(prefix: str) -> Iterator[Children]:
    """``Children`` logging to a temporary folder of their own, stopped at the end (and the
    folder removed)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        children = Children(Path(workdir))
        try:
            yield children
        finally:
            children.stop()


def database_backend_pids() -> list[int]:
    """The PostgreSQL backends serving the current database (all clients of the bench)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return [pid for (pid,) in cursor.fetchall()]


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """{pid: user + system CPU seconds so far} of those of ``pids`` still alive."""
    seconds = {}
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds[pid] = times.user + times.system
    return seconds


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two ``cpu_seconds`` snapshots (a pid new in ``after``
    counts from zero)."""
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())


def run_bench(name: str, *args: str, timeout: float = 300) -> str:
    """``manage.py <name> <args>`` in a process of its own, as a developer runs it (DEBUG off,
    the bench settings): its standard output, after checking it ended well."""

    result = subprocess.run(
        [sys.executable, "manage.py", name, *args],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DEBUG": "0", "DJANGO_SETTINGS_MODULE": "tests.bench.settings"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-2000:] + result.stdout[-2000:]
    return result.stdout
