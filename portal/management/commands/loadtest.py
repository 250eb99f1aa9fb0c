"""``manage.py loadtest --seconds 60 --users 50``: the console under load (issue 6 item 6).

Everything runs on this machine and stops by itself:

1. a scratch PostgreSQL database (``loadtest_vcportal``, created and migrated with Django's
   test-database machinery, dropped at the end unless ``--keep``) filled with five projects of
   ten users each, 120 clusters per project (two to four members each) and, per user, one
   cluster of their own to start and stop;
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
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from http.client import HTTPConnection
from pathlib import Path
from urllib.parse import quote

import psutil
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test.utils import override_settings

from clusters.models import ClusterStatus, VirtualCluster
from portal.management.scratch import bench_catalog, scratch_database
from portal.models import AuditEvent, Project, Role, RoleBinding
from portal.projects import SESSION_KEY as PROJECT_KEY
from vms.models import BillingType, FabricType, VirtualMachine

PROJECTS = 5
CLUSTERS_PER_PROJECT = 120
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
EXPECTED = {200, 302}
REFUSED = {409}  # the rules said no (SPEC §5): an answer, not an error


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
        parser.add_argument("--database", default="loadtest_vcportal", help="scratch database")
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args, **opts):
        if connection.vendor != "postgresql":
            raise CommandError("the load test runs on PostgreSQL: set DATABASE_URL=postgres://...")
        if opts["users"] > PROJECTS * 10:
            raise CommandError(f"at most {PROJECTS * 10} users")
        self.opts = opts
        self.secret_key = secrets.token_urlsafe(50)
        self.children = []
        started = time.perf_counter()
        with scratch_database(opts["database"], keep=opts["keep"], say=self.say):
            try:
                with (
                    override_settings(SECRET_KEY=self.secret_key),
                    tempfile.TemporaryDirectory(prefix="loadtest-") as workdir,
                ):
                    self.workdir = Path(workdir)
                    self.run_test()
            finally:
                self.stop_children()
                self.flush_redis()
        self.say(f"total {time.perf_counter() - started:.0f} s")

    def say(self, text=""):
        self.stdout.write(text)
        self.stdout.flush()

    # -----------------------------------------------------------------------------------------
    # Data and sessions

    def make_world(self):
        zone, h100, _capacity = bench_catalog()
        operator = Role.objects.get(name="operator")
        User = get_user_model()
        users = []
        rng = random.Random(self.opts["seed"])
        for p in range(PROJECTS):
            project = Project.objects.create(slug=f"load-{p}", name=f"load-{p}")
            clusters = VirtualCluster.objects.bulk_create(
                VirtualCluster(
                    project=project,
                    name=f"p{p}-cluster-{i:03d}",
                    zone=zone,
                    instance_type=h100,
                    fabric_type=FabricType.INFINIBAND,
                    status=rng.choice([ClusterStatus.UNALLOCATED, ClusterStatus.TERMINATED]),
                )
                for i in range(CLUSTERS_PER_PROJECT)
            )
            VirtualMachine.objects.bulk_create(
                VirtualMachine(
                    project=project,
                    name=f"{c.name}-m{j}",
                    zone=zone,
                    instance_type=h100,
                    billing_type=BillingType.ON_DEMAND,
                    cluster=c,
                    private_ip=f"10.{p}.{i // 200}.{(i * 4 + j) % 250 + 2}",
                )
                for i, c in enumerate(clusters)
                for j in range(2 + i % 3)
            )
            for u in range(10):
                user = User(username=f"load-{p}-{u}")
                user.set_unusable_password()
                user.save()
                RoleBinding.objects.create(user=user, project=project, role=operator)
                own = VirtualCluster.objects.create(
                    project=project,
                    name=f"own-{p}-{u}",
                    zone=zone,
                    instance_type=h100,
                    fabric_type=FabricType.INFINIBAND,
                    status=ClusterStatus.UNALLOCATED,
                )
                members = VirtualMachine.objects.bulk_create(
                    VirtualMachine(
                        project=project,
                        name=f"own-{p}-{u}-m{j}",
                        zone=zone,
                        instance_type=h100,
                        billing_type=BillingType.RESERVED,
                        cluster=own,
                        private_ip=f"10.9{p}.{u}.{j + 2}",
                    )
                    for j in range(2)
                )
                users.append(
                    {
                        "user": user,
                        "project": project,
                        "own": own.pk,
                        "members": [vm.pk for vm in members],
                        "clusters": [c.pk for c in clusters],
                    }
                )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        return users[: self.opts["users"]]

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

    def database_url(self):
        db = connection.settings_dict
        auth = quote(db["USER"]) + (":" + quote(db["PASSWORD"]) if db["PASSWORD"] else "")
        return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"

    def child_env(self):
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
        env = {key: os.environ[key] for key in keep if key in os.environ}
        env.update(
            DJANGO_SETTINGS_MODULE="portal.settings",
            PORTAL_MODE="production",
            SECRET_KEY=self.secret_key,
            SECURE_SSL_REDIRECT="0",
            ALLOWED_HOSTS="127.0.0.1",
            DATABASE_URL=self.database_url(),
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

    def spawn(self, command, name):
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115 - lives as long as the child
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=self.child_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.children.append((name, process, log))
        return process

    def stop_children(self):
        """SIGTERM each process group we started, SIGKILL what is left after 10 s."""
        for _name, process, _log in self.children:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _name, process, log in self.children:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()
        self.children = []

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
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.flush_redis()
        self.gunicorn = self.spawn(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "portal.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(self.opts["workers"]),
                "--worker-class",
                "gthread",
                "--threads",
                str(self.opts["threads"]),
                "--keep-alive",
                "75",
                "--timeout",
                "60",
                "--log-level",
                "warning",
            ],
            "gunicorn",
        )
        self.worker = self.spawn(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--pool=prefork",
                "--concurrency=2",
                "--without-mingle",
                "--without-gossip",
                "--loglevel=WARNING",
                f"--hostname=loadtest-{os.getpid()}@%h",
            ],
            "celery",
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                body = response.read()
                conn.close()
                if response.status == 200:
                    break
            except OSError:
                pass
            if self.gunicorn.poll() is not None or time.monotonic() > deadline:
                log = (self.workdir / "gunicorn.log").read_text()[-3000:]
                raise CommandError(f"gunicorn did not become healthy:\n{log}")
            time.sleep(0.2)
        self.say(
            f"gunicorn on 127.0.0.1:{port}: {self.opts['workers']} workers x "
            f"{self.opts['threads']} threads, production settings; /healthz {body.decode()}"
        )
        return port

    # -----------------------------------------------------------------------------------------
    # The load

    def run_test(self):
        started = time.perf_counter()
        users = self.make_world()
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
        children_before = self.server_cpu()
        database_before = self.database_cpu()
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
            "gunicorn + celery": self.server_cpu() - children_before,
            "postgres": self.database_cpu(database_before),
        }
        cpu["rest of the machine"] = busy(psutil.cpu_times()) - machine_before - sum(cpu.values())
        return results, elapsed, cpu

    def database_cpu(self, before=None):
        """CPU seconds of the scratch database's backends (those alive now), or a snapshot."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            pids = [pid for (pid,) in cursor.fetchall()]
        snapshot = {}
        for pid in pids:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.NoSuchProcess:
                continue
            snapshot[pid] = times.user + times.system
        if before is None:
            return snapshot
        return sum(value - before.get(pid, 0.0) for pid, value in snapshot.items())

    def server_cpu(self):
        total = 0.0
        for _name, process, _log in self.children:
            try:
                parent = psutil.Process(process.pid)
                for p in [parent, *parent.children(recursive=True)]:
                    times = p.cpu_times()
                    total += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return total

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


def busy(times):
    """CPU seconds the whole machine spent not idle."""
    return times.user + times.nice + times.system + times.irq + times.softirq + times.steal


def percentiles(values):
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {50: cuts[49], 95: cuts[94], 99: cuts[98]}


def cookie_jar(response):
    jar = {}
    for header, value in response.getheaders():
        if header.lower() == "set-cookie":
            name, _sep, rest = value.partition("=")
            jar[name.strip()] = rest.split(";", 1)[0]
    return jar


class UserClient:
    """One browser: a keep-alive connection, its cookies, its CSRF token."""

    def __init__(self, port, session_key):
        self.port = port
        self.cookies = {"__Host-sessionid": session_key}
        self.csrf_token = ""
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()

    def request(self, method, path, headers=None):
        """(status or exception name, seconds, body)."""
        headers = {
            **(headers or {}),
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
        }
        if method == "POST":
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        started = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, b"" if method == "POST" else None, headers)
            response = self.conn.getresponse()
            body = response.read()
        except (OSError, ValueError) as exc:  # http.client errors are OSError/ValueError kinds
            self.close()
            self.conn = None
            return type(exc).__name__, time.perf_counter() - started, str(exc).encode()
        seconds = time.perf_counter() - started
        self.cookies.update(cookie_jar(response))
        if response.getheader("Connection", "").lower() == "close":
            self.close()
            self.conn = None
        token = re.search(rb'"X-CSRFToken": "([^"]+)"', body)
        if token:
            self.csrf_token = token.group(1).decode()
        return response.status, seconds, body

    def get(self, path):
        return self.request("GET", path)

    def timed(self, kind, method, path, headers=None):
        status, seconds, body = self.request(method, path, headers)
        detail = "" if status in EXPECTED else f"{method} {path} {body[:300]!r}"
        return kind, status, seconds, detail
