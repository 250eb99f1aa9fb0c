"""``manage.py loadtest --seconds 60 --users 50``: the console under load.

Everything runs on this machine and stops by itself:

1. a scratch PostgreSQL database (``tests.bench.scratch``: a fresh ``vc_scratch_…`` name,
   migrated, dropped at the end unless ``--keep``) filled with five projects of ten users
   each, 120 clusters per project (two to four members each) and, per user, one cluster of
   their own to start and stop (``tests.bench.worlds.load_world``);
2. gunicorn with the production settings (PORTAL_MODE=production, a fresh SECRET_KEY,
   collected static files, Redis cache and broker) on a free 127.0.0.1 port — plain http, so
   SECURE_SSL_REDIRECT=0 — and a Celery worker (simulator at ``--step`` seconds a step), both
   in process groups of their own;
3. ``--users`` threads, each a logged-in user on one keep-alive ``http.client`` connection,
   looping over a fixed mix for ``--seconds`` (bounded by ``--max-requests`` too): the cluster
   list, the detail tabs (full pages and HTMX fragments), the header polling, and start/stop
   of the user's cluster and of its member VMs, as the buttons send them (HTMX, CSRF header).

It prints throughput, p50/p95/p99 per kind of request and overall, and the error count:
any 5xx, connection failure, timeout or unexpected status. A refusal the rules give (409,
e.g. stopping a cluster whose members run) is an answer, not an error, and is counted apart.
"""

import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from http.client import HTTPConnection
from pathlib import Path

import psutil
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test.utils import override_settings

from clusters.models import VirtualCluster
from portal.iam.projects import SESSION_KEY as PROJECT_KEY
from portal.models import AuditEvent
from tests.bench.load_client import EXPECTED, UserClient, busy, cookie_jar, percentiles
from tests.bench.processes import (
    Children,
    celery_worker_command,
    cpu_seconds,
    database_backend_pids,
    free_port,
    gunicorn_command,
    spent,
)
from tests.bench.scratch import database_url, scratch_database
from tests.bench.worlds import LOAD_PROJECTS, load_world
from vms.models import VirtualMachine

# kind: weight. Reads dominate, as in a console; actions are what the buttons send.
MIX = {
    "list": 24,
    "list_page": 6,
    "detail": 12,
    "members": 8,
    "members_htmx": 8,
    "activity": 4,
    "header_poll": 24,
    "action": 14,
}
REFUSED = {409}  # the rules said no (docs/rules.md): an answer, not an error


class Command(BaseCommand):
    help = "Load-test the console on gunicorn (production settings), PostgreSQL and Redis."

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=60.0)
        parser.add_argument("--users", type=int, default=50)
        parser.add_argument("--max-requests", type=int, default=1_000_000)
        parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
        parser.add_argument("--threads", type=int, default=4, help="threads per worker")
        parser.add_argument("--step", type=float, default=0.3, help="simulator seconds a step")
        parser.add_argument(
            "--redis",
            default="redis://127.0.0.1:6379/9",
            help="broker and cache (a database number of the load test's own)",
        )
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args, **opts):
        if connection.vendor != "postgresql":
            raise CommandError("the load test runs on PostgreSQL: set DATABASE_URL=postgres://...")
        if opts["users"] > LOAD_PROJECTS * 10:
            raise CommandError(f"at most {LOAD_PROJECTS * 10} users")
        self.opts = opts
        self.secret_key = secrets.token_urlsafe(50)
        started = time.perf_counter()
        with (
            scratch_database(keep=opts["keep"], say=self.say),
            override_settings(SECRET_KEY=self.secret_key),
            tempfile.TemporaryDirectory(prefix="loadtest-") as workdir,
        ):
            self.workdir = Path(workdir)
            self.children = Children(self.workdir)
            try:
                self.run_test()
            finally:
                self.children.stop()
                self.flush_redis()
        self.say(f"total {time.perf_counter() - started:.0f} s")

    def say(self, text=""):
        self.stdout.write(text)
        self.stdout.flush()

    # -----------------------------------------------------------------------------------------
    # Sessions

    def session_for(self, user, project):
        """A logged-in session as django.contrib.auth.login() leaves it (same SECRET_KEY as
        gunicorn): 50 PBKDF2 logins would cost the server ~15 CPU-seconds before any load."""
        store = SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store[PROJECT_KEY] = project.pk
        store.create()
        return store.session_key

    # -----------------------------------------------------------------------------------------
    # Processes

    def child_env(self):
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
        env = {key: os.environ[key] for key in keep if key in os.environ}
        env.update(
            DJANGO_SETTINGS_MODULE="portal.settings",
            PORTAL_MODE="production",
            SECRET_KEY=self.secret_key,
            SECURE_SSL_REDIRECT="0",
            ALLOWED_HOSTS="127.0.0.1",
            DATABASE_URL=database_url(),
            DB_POOL_MAX=str(self.opts["threads"] + 1),
            CELERY_BROKER_URL=self.opts["redis"],
            CACHE_URL=self.opts["redis"],
            STATIC_ROOT=str(self.workdir / "static"),
            PORTAL_VAR_DIR=str(self.workdir / "var"),
            SIMULATOR_STEP_SECONDS=str(self.opts["step"]),
            LOG_LEVEL="WARNING",
            PYTHONPATH=str(settings.BASE_DIR),
        )
        return env

    def flush_redis(self):
        import redis

        try:
            redis.Redis.from_url(self.opts["redis"]).flushdb()
        except redis.RedisError as exc:
            self.say(f"could not flush {self.opts['redis']}: {exc}")

    def start_servers(self):
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
            cwd=settings.BASE_DIR,
            env=self.child_env(),
            check=True,
            timeout=300,
        )
        port = free_port()
        self.flush_redis()
        env = self.child_env()
        gunicorn = self.children.spawn(
            gunicorn_command(port, self.opts["workers"], self.opts["threads"], keep_alive=75),
            "gunicorn",
            env,
        )
        self.children.spawn(celery_worker_command(f"loadtest-{os.getpid()}"), "celery", env)
        self.children.wait_listening(gunicorn, "gunicorn", port)
        conn = HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        body = response.read()
        conn.close()
        if response.status != 200:
            raise CommandError(f"gunicorn is not healthy: {response.status} {body[:300]!r}")
        self.say(
            f"gunicorn on 127.0.0.1:{port}: {self.opts['workers']} workers x "
            f"{self.opts['threads']} threads, production settings; /healthz {body.decode()}"
        )
        return port

    # -----------------------------------------------------------------------------------------
    # The load

    def run_test(self):
        started = time.perf_counter()
        users = load_world(self.opts["seed"])[: self.opts["users"]]
        for u in users:
            u["session"] = self.session_for(u["user"], u["project"])
        self.say(
            f"data: {VirtualCluster.objects.count():,} clusters, "
            f"{VirtualMachine.objects.count():,} VMs, {len(users)} users "
            f"({time.perf_counter() - started:.1f} s)"
        )
        port = self.start_servers()
        self.smoke_login(port)
        events_before = AuditEvent.objects.count()
        results, elapsed, cpu = self.drive(port, users)
        self.report(results, elapsed, cpu)
        transitions = Counter(
            AuditEvent.objects.order_by().values_list("action", "outcome")[events_before:]
        )
        self.say(
            "audit events during the run: "
            + ", ".join(
                f"{action} {outcome.lower()} {n}"
                for (action, outcome), n in sorted(transitions.items())
            )
        )

    def smoke_login(self, port):
        """One real login through the production stack (CSRF, throttle, session rotation)."""
        user = get_user_model().objects.create_user("load-smoke", password="load-smoke-pass-1")
        conn = HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/login/")
        response = conn.getresponse()
        page = response.read().decode()
        cookies = cookie_jar(response)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        body = f"username={user.username}&password=load-smoke-pass-1&csrfmiddlewaretoken={token}"
        conn.request(
            "POST",
            "/login/",
            body,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
            },
        )
        response = conn.getresponse()
        response.read()
        conn.close()
        if response.status != 302 or "__Host-sessionid" not in cookie_jar(response):
            raise CommandError(f"production login failed: {response.status}")
        self.say("production login: 302 with a __Host-sessionid cookie")

    def drive(self, port, users):
        deadline = time.monotonic() + self.opts["seconds"]
        budget = [self.opts["max_requests"]]
        lock = threading.Lock()
        results = []
        kinds, weights = zip(*MIX.items(), strict=True)
        process = psutil.Process()
        cpu_before = process.cpu_times()
        children_before = cpu_seconds(self.children.pids())
        database_before = cpu_seconds(database_backend_pids())
        machine_before = busy(psutil.cpu_times())

        def user_loop(index, u):
            rng = random.Random(self.opts["seed"] * 1000 + index)
            client = UserClient(port, u["session"])
            mine = []
            try:
                client.get("/clusters/")  # the CSRF cookie and token, as a browser gets them
                while time.monotonic() < deadline:
                    with lock:
                        if budget[0] <= 0:
                            break
                        budget[0] -= 1
                    kind = rng.choices(kinds, weights)[0]
                    mine.append(self.one(client, kind, u, rng))
            finally:
                client.close()
                with lock:
                    results.extend(mine)

        threads = [
            threading.Thread(target=user_loop, args=(i, u), daemon=True)
            for i, u in enumerate(users)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=self.opts["seconds"] + 120)
        elapsed = time.monotonic() - started
        cpu_after = process.cpu_times()
        cpu = {
            "load generator": (cpu_after.user + cpu_after.system)
            - (cpu_before.user + cpu_before.system),
            "gunicorn + celery": spent(children_before, cpu_seconds(self.children.pids())),
            "postgres": spent(database_before, cpu_seconds(database_backend_pids())),
        }
        cpu["rest of the machine"] = busy(psutil.cpu_times()) - machine_before - sum(cpu.values())
        return results, elapsed, cpu

    def one(self, client, kind, u, rng):
        """One request of ``kind``: (kind, status, seconds, detail)."""
        cluster = rng.choice(u["clusters"])
        htmx = {"HX-Request": "true"}
        if kind == "list":
            return client.timed(kind, "GET", "/clusters/")
        if kind == "list_page":
            return client.timed(kind, "GET", f"/clusters/?page={rng.randint(1, 3)}")
        if kind == "detail":
            return client.timed(kind, "GET", f"/clusters/{rng.choice([cluster, u['own']])}/")
        if kind == "members":
            return client.timed(kind, "GET", f"/clusters/{cluster}/vms/")
        if kind == "members_htmx":
            return client.timed(
                kind, "GET", f"/clusters/{u['own']}/vms/", {**htmx, "HX-Target": "tab-panel"}
            )
        if kind == "activity":
            return client.timed(kind, "GET", f"/clusters/{u['own']}/activity/", htmx)
        if kind == "header_poll":
            return client.timed(kind, "GET", f"/clusters/{u['own']}/header/?seen=x", htmx)
        return self.action(client, u, rng)

    def action(self, client, u, rng):
        """What the user's buttons would do next, read from the header as the page shows it."""
        own = u["own"]
        status, _seconds, body = client.request(
            "GET", f"/clusters/{own}/header/", {"HX-Request": "true"}
        )
        state = re.search(rb'data-status="([A-Z]+)"', body or b"")
        state = state.group(1).decode() if state else ""
        member = rng.choice(u["members"])
        if state in ("UNALLOCATED", "TERMINATED"):
            path = f"/clusters/{own}/start/"
        elif state == "RUNNING":
            # Start members, stop them, then stop the cluster (refused while members run).
            path = rng.choice(
                [f"/vms/{member}/start/", f"/vms/{member}/stop/", f"/clusters/{own}/stop/"]
            )
        else:
            path = f"/clusters/{own}/stop/"  # stop during a start: allowed from 할당됨/대기중
        return client.timed(
            "action",
            "POST",
            path,
            {
                "HX-Request": "true",
                "X-CSRFToken": client.csrf_token,
            },
        )

    # -----------------------------------------------------------------------------------------

    def report(self, results, elapsed, cpu):
        by_kind = defaultdict(list)
        statuses = Counter()
        errors = []
        for kind, status, seconds, detail in results:
            by_kind[kind].append(seconds * 1000)
            statuses[status] += 1
            if status not in EXPECTED | REFUSED:
                errors.append((kind, status, detail))
        every = [ms for values in by_kind.values() for ms in values]
        if not every:
            raise CommandError("no request completed")
        self.say()
        self.say(
            f"{len(results):,} requests in {elapsed:.1f} s from {self.opts['users']} users: "
            f"{len(results) / elapsed:.1f} req/s"
        )
        self.say(
            f"{'kind':14} {'count':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        )
        for kind in [*MIX, "all"]:
            values = every if kind == "all" else by_kind.get(kind)
            if not values:
                continue
            q = percentiles(values)
            self.say(
                f"{kind:14} {len(values):>7} {q[50]:>8.1f} {q[95]:>8.1f} {q[99]:>8.1f} "
                f"{max(values):>8.1f}"
            )
        self.say(
            "statuses: "
            + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items(), key=lambda x: str(x[0])))
        )
        self.say(f"refused by the rules (409): {sum(statuses[s] for s in REFUSED)}")
        self.say(f"errors: {len(errors)}")
        for kind, status, detail in errors[:5]:
            self.say(f"  {kind} {status}: {detail[:200]!r}")
        self.say(
            "CPU seconds: "
            + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items())
            + f" (of {elapsed * os.cpu_count():.0f} available on {os.cpu_count()} cores)"
        )
