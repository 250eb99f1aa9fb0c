"""Real processes for the fault suite: a private Redis, a Celery worker on the test database,
and the means to kill them (SIGKILL, by the process group this suite started, nothing else)."""

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection

from tests.waiting import wait_until

BASE_DIR = Path(settings.BASE_DIR)
WORKER_APP_NAME = "vc-fault-worker"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _kill_group(process):
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class RedisServer:
    """A redis-server of our own on a free port: no persistence, so a restart loses the queue."""

    def __init__(self, workdir):
        self.port = free_port()
        self.workdir = Path(workdir)
        self.process = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_until(self._answers, 10, what="redis-server")

    def _answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self):
        _kill_group(self.process)
        self.process = None

    def restart(self):
        self.kill()
        self.start()

    def command(self, *words):
        """One inline command's reply line (``+OK``, ``:3``…), as text."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(" ".join(words).encode() + b"\r\n")
            return sock.recv(64).decode().split("\r\n", 1)[0]

    def flush(self):
        self.command("FLUSHALL")

    def holds_messages(self, queue="celery"):
        """Whether a message waits in ``queue`` or is delivered and not yet acknowledged
        (kombu's ``unacked`` hash)."""
        return self.command("LLEN", queue) != ":0" or self.command("HLEN", "unacked") != ":0"


# The processes started here are handed the test database as a postgres:// URL: a test
# that starts one (``Worker``, ``tests.faults.stack.running_stack``) is marked with this.
HANDS_A_POSTGRES_URL = pytest.mark.postgres_only(
    "its worker processes are handed the test database as a postgres:// URL"
    " (tests.faults.harness.worker_database_url)"
)


def worker_database_url(**query):
    db = settings.DATABASES["default"]
    params = "&".join(f"{k}={v}" for k, v in query.items())
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}?{params}"


def celery_env(broker_url, var_dir, **extra):
    """The environment of a ``celery -A portal`` process on the test database."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings",
        DATABASE_URL=worker_database_url(application_name=WORKER_APP_NAME, pool_max=4),
        CELERY_BROKER_URL=broker_url,
        CELERY_TASK_ALWAYS_EAGER="0",
        PORTAL_VAR_DIR=str(var_dir),
        PYTHONPATH=str(BASE_DIR),
    )
    env.update({key: str(value) for key, value in extra.items()})
    return env


def children_of(pid):
    """Pids whose parent is ``pid`` (read from /proc: the pool children of a worker)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class Worker:
    """``celery -A portal worker`` on the test database and the private broker."""

    def __init__(
        self,
        broker_url,
        logdir,
        step_seconds=1.0,
        concurrency=1,
        var_dir=None,
        queue="celery",
        **env,
    ):
        self.broker_url = broker_url
        self.queue = queue
        self.log_path = Path(logdir) / f"worker-{time.monotonic_ns()}.log"
        self.var_dir = var_dir or self.log_path.parent / "var"
        self.env = {"SIMULATOR_STEP_SECONDS": step_seconds, **env}
        self.concurrency = concurrency
        self.process = None

    def command(self):
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--pool=prefork",
            f"--concurrency={self.concurrency}",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
            "-Q",
            self.queue,
            "--loglevel=INFO",
            f"--hostname=fault-{self.queue}-{os.getpid()}-{time.monotonic_ns()}@%h",
        ]

    def start(self):
        self.log = open(self.log_path, "w")  # closed in kill()
        self.process = subprocess.Popen(
            self.command(),
            cwd=BASE_DIR,
            env=celery_env(self.broker_url, self.var_dir, **self.env),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(
            lambda: " ready." in self.output() or self.process.poll() is not None,
            30,
            interval=0.05,
            what="the worker to be ready",
        )
        assert self.process.poll() is None, self.output()[-3000:]
        return self

    def output(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def received(self, task):
        return len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] received", self.output()))

    def tasks_in_hand(self):
        """Tasks whose last word in the log is ``received``: not yet ended (succeeded,
        failed, retried, rejected…); a retried task is received again under its id."""
        last = dict(re.findall(r"Task [\w.]+\[([^\]]+)\] (\w+)", self.output()))
        return sorted(task_id for task_id, word in last.items() if word == "received")

    def wait_received(self, task, count=1, timeout=10):
        wait_until(lambda: self.received(task) >= count, timeout, what=f"{task} #{count}")

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def kill(self):
        """SIGKILL the worker's whole process group: the main process and its children."""
        _kill_group(self.process)
        if self.process is not None:
            self.log.close()
        self.process = None


def filesystem_options(var_dir):
    """The transport options portal.settings derives for ``PORTAL_VAR_DIR=var_dir``."""
    celery_dir = Path(var_dir) / "celery"
    return {
        "data_folder_in": str(celery_dir / "queue"),
        "data_folder_out": str(celery_dir / "queue"),
        "processed_folder": str(celery_dir / "processed"),
        "control_folder": str(celery_dir / "control"),
        "store_processed": False,
    }


def terminate_worker_connections():
    """Drop the worker's database connections under it (pg_terminate_backend)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            [WORKER_APP_NAME],
        )
        return cursor.fetchone()[0]


@contextmanager
def broker(app, url, transport_options=None):
    """Point this process's Celery app at ``url``, tasks really sent (not eager).

    Celery reads CELERY_BROKER_URL from the environment before its own configuration
    (``app.conf.broker_url`` is a property that looks there first), so that is set too:
    otherwise a run with CELERY_BROKER_URL exported (.ci/run) would publish elsewhere.
    """
    keys = ("broker_url", "task_always_eager", "broker_transport_options")
    saved = {key: app.conf[key] for key in keys}
    saved_env = {key: os.environ.get(key) for key in ENV_BROKER_KEYS}

    def use(**conf):
        app.conf.update(conf)
        app._pool = None
        app.amqp._producer_pool = None

    for key in ENV_BROKER_KEYS:
        os.environ.pop(key, None)
    os.environ["CELERY_BROKER_URL"] = url
    use(
        broker_url=url,
        task_always_eager=False,
        broker_transport_options=transport_options or {},
    )
    try:
        yield
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        use(**saved)


@contextmanager
def thread_worker(app, url, transport_options=None, shutdown_timeout=10):
    """A real Celery worker in a thread of this process (solo pool), on ``url``."""
    with (
        kept_logging(),
        broker(app, url, transport_options),
        start_worker(
            app, pool="solo", perform_ping_check=False, shutdown_timeout=shutdown_timeout
        ) as worker,
    ):
        yield worker


@contextmanager
def kept_logging():
    """Logging as it was before a worker started in this process: its start configures
    logging again (Django's setup, then Celery's ``setup_logging`` at the worker's level), which
    would leave every later test's INFO records dropped and its handlers on this test's
    streams."""
    manager = logging.Logger.manager
    loggers = [
        manager.root,
        *(x for x in manager.loggerDict.values() if isinstance(x, logging.Logger)),
    ]
    saved = [(x, x.handlers[:], x.level, x.propagate, x.disabled) for x in loggers]
    try:
        yield
    finally:
        for logger, handlers, level, propagate, disabled in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate, logger.disabled = propagate, disabled


ENV_BROKER_KEYS = ("CELERY_BROKER_URL", "CELERY_BROKER_READ_URL", "CELERY_BROKER_WRITE_URL")
