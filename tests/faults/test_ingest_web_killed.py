"""A web process killed while agents post: no sample it acknowledged is lost.

Two gunicorn processes (as two web machines behind a balancer) serve the ingest on the test
database; four agents post their samples to them in turn, each acknowledged sample noted. One
web process is SIGKILLed (master and workers) mid-stream; the agents' posts to it fail and go
to the other, as an agent's retry does. Every acknowledged sample must be in the database:
the ingest answers 2xx only after its rows are committed.
"""

import os
import signal
import subprocess
import threading
import time
from http.client import HTTPConnection, HTTPException
from urllib.parse import urlsplit

import orjson
import pytest
from django.db import connection

from metrics import services
from metrics.vm_agent.main import FIELDS
from tests.bench.processes import gunicorn_command
from tests.faults.harness import BASE_DIR, HANDS_A_POSTGRES_URL, free_port, worker_database_url
from tests.waiting import wait_until
from vms.models import VmStatus

AGENTS = 4
BOOT = 120  # gunicorn's boot on a loaded 2-core machine: decided by its answer


def web_process(tmp_path, name):
    port = free_port()
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings",
        DATABASE_URL=worker_database_url(application_name=f"test-web-{name}"),
        CELERY_TASK_ALWAYS_EAGER="1",  # a rollup a late sample queues runs in place
        PORTAL_VAR_DIR=str(tmp_path / name),
        PYTHONPATH=str(BASE_DIR),
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        METRICS_RATE_PER_MINUTE="100000",  # these agents post back to back
    )
    with open(tmp_path / f"{name}.log", "w") as log:
        process = subprocess.Popen(
            gunicorn_command(port, 2, 2, keep_alive=5),
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the kill takes master and workers
        )
    return process, f"http://127.0.0.1:{port}"


def post_or_get(url, path, body=None, headers=None, timeout=10):
    """The status of one request (a connection of its own), or None if it failed."""
    parts = urlsplit(url)
    http = HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        http.request("POST" if body is not None else "GET", path, body=body, headers=headers or {})
        return http.getresponse().status
    except (OSError, HTTPException):
        return None
    finally:
        http.close()


def answers(url):
    return post_or_get(url, "/healthz", timeout=2) in (200, 503)


class Agent(threading.Thread):
    """Posts one sample a request, to the web processes in turn; a failed post goes to the
    next one (the same sample again). Notes each acknowledged sample's instant."""

    def __init__(self, token, urls, base, stop):
        super().__init__(daemon=True)
        self.token, self.urls, self.base, self.stop = token, urls, base, stop
        self.acked, self.failed = [], 0

    def run(self):
        turn, n = 0, 0
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        while not self.stop.is_set():
            ts = self.base + n
            row = [ts, 31.25, 42.5, 96.5, 78.25, 5.5e7, 6e6, 2e10, 2.1e10, [], []]
            body = orjson.dumps({"fields": FIELDS, "rows": [row]})
            url = self.urls[turn % len(self.urls)]
            turn += 1
            status = post_or_get(url, "/api/metrics/ingest", body, headers)
            if status is not None and status < 300:
                self.acked.append(ts)
                n += 1
            else:
                self.failed += 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@HANDS_A_POSTGRES_URL
def test_no_acknowledged_sample_is_lost_when_a_web_process_dies(world, tmp_path):
    cluster = world.cluster("ingest", status="RUNNING")
    vms = world.members(cluster, AGENTS, status=VmStatus.RUNNING)
    tokens = [services.rotate_token(vm.pk, actor=None)[1] for vm in vms]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (victim, url_a), (survivor, url_b) = web_process(tmp_path, "a"), web_process(tmp_path, "b")
    stop = threading.Event()
    agents = [
        Agent(token, [url_a, url_b], time.time() - 600 + i * 0.001, stop)
        for i, token in enumerate(tokens)
    ]
    try:
        for url in (url_a, url_b):
            wait_until(lambda url=url: answers(url), BOOT, interval=0.2, what=f"{url} to answer")
        for agent in agents:
            agent.start()
        wait_until(
            lambda: all(len(a.acked) >= 10 for a in agents), BOOT, what="samples acknowledged"
        )
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        at_kill = [len(a.acked) for a in agents]
        wait_until(
            lambda: all(len(a.acked) >= k + 10 for a, k in zip(agents, at_kill, strict=True)),
            BOOT,
            what="the agents to go on through the other web process",
        )
    finally:
        stop.set()
        for agent in agents:
            agent.join(timeout=30)
        for process in (victim, survivor):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    assert any(a.failed for a in agents)  # the kill was felt
    for vm, agent in zip(vms, agents, strict=True):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT extract(epoch FROM ts) FROM metrics_sample WHERE vm_id = %s", [vm.pk]
            )
            stored = {round(float(ts), 3) for (ts,) in cursor.fetchall()}
        lost = [ts for ts in agent.acked if round(ts, 3) not in stored]
        assert lost == [], f"{vm.name}: {len(lost)} of {len(agent.acked)} acknowledged samples lost"
