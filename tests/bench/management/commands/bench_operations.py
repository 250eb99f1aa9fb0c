"""``manage.py bench_operations``: the cluster-scale bulk actions against what they
replace, in a scratch database of their own (``tests.bench.scratch``), on PostgreSQL:

- 가상머신 연결 of 64 VMs in one request, against 64 × one attach from the VM page's 클러스터
  section (target: ≤ 0.5), and its queries: per VM (the slope between 16 and 64 VMs, ≤ 4)
  plus a constant;
- 멤버 모두 시작 on a running cluster of 256 stopped members in one request, against one VM
  start (target: ≤ 10×); the per-VM work is queued for workers (none run here: the queue is
  purged after each round, and the statuses put back);
- the Operation's progress poll (the 256-item card, HTMX) against the floor view (≤ 2×).

POSTs go through Django's test ``Client`` (CSRF and sessions as a browser has them), both
sides of each ratio alike; GETs through the WSGI handler like ``bench_pages``.
"""

import statistics
import time
from contextlib import contextmanager

from django.core.handlers.wsgi import WSGIHandler
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings

from clusters.models import ClusterStatus, Operation, VirtualCluster
from portal.catalog.models import FabricType
from portal.celery import app
from portal.compute.models import SimulatorAllocation
from portal.iam.projects import SESSION_KEY
from portal.models import Project, Role, RoleBinding
from tests.bench.command import BenchCommand
from tests.bench.inprocess import BENCH_SETTINGS, environ, session_cookie
from tests.bench.worlds import bench_catalog
from vms.models import BillingType, VirtualMachine, VmStatus

TARGETS = {"attach_ratio": 0.5, "attach_queries_per_vm": 4, "start_ratio": 10.0, "poll": 2.0}
HX = {"HTTP_HX_REQUEST": "true"}
ATTACH_MANY = 64
START_MANY = 256


class Command(BenchCommand):
    help = "Benchmark the cluster-scale bulk actions against the single actions they replace."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--rounds", type=int, default=10, help="measured rounds per figure")

    def refusal(self, opts):
        return "--rounds must be at least 2" if opts["rounds"] < 2 else ""

    @contextmanager
    def around(self):
        saved = {key: app.conf[key] for key in ("task_always_eager",)}
        app.conf.task_always_eager = False  # queue for workers, as in production
        try:
            with override_settings(**BENCH_SETTINGS):
                yield
        finally:
            app.conf.update(saved)
            app.control.purge()

    # -----------------------------------------------------------------------------------------

    def run_bench(self):
        zone, h100, capacity = bench_catalog()
        project = Project.objects.create(slug="bench", name="bench")
        user = self.user(project)
        client = Client(HTTP_HOST="127.0.0.1")  # the host BENCH_SETTINGS allows
        client.force_login(user)
        session = client.session
        session[SESSION_KEY] = project.pk  # as the switcher leaves it
        session.save()
        self.client = client
        self.cookie = session_cookie(user, project)
        self.handler = WSGIHandler()
        results = {}
        results.update(self.bench_attach(project, zone, h100))
        results.update(self.bench_start(project, zone, h100, capacity, user))
        self.report(results)

    def user(self, project):
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.create_user("bench-admin", password="bench-pass-1")
        RoleBinding.objects.create(user=user, project=project, role=Role.objects.get(name="admin"))
        return user

    def vms(self, project, zone, itype, prefix, count, **fields):
        return VirtualMachine.objects.bulk_create(
            VirtualMachine(
                project=project,
                name=f"{prefix}-{i:04d}",
                zone=zone,
                instance_type=itype,
                billing_type=BillingType.ON_DEMAND,
                status=VmStatus.STOPPED,
                private_ip=f"10.2.{i // 250}.{i % 250 + 2}",
                **fields,
            )
            for i in range(count)
        )

    def post(self, path, data):
        started = time.perf_counter()
        response = self.client.post(path, data, **HX)
        elapsed = time.perf_counter() - started
        if response.status_code not in (200, 204):
            raise CommandError(f"POST {path}: {response.status_code} {response.content[:300]!r}")
        return elapsed

    def get(self, path):
        env = {**environ(path, "", self.cookie), **HX}
        status = []
        started = time.perf_counter()
        result = self.handler(env, lambda s, headers, exc_info=None: status.append(s))
        b"".join(result)
        result.close()
        elapsed = time.perf_counter() - started
        if not status[0].startswith(("200", "286")):
            raise CommandError(f"GET {path}: {status[0]}")
        return elapsed

    # -----------------------------------------------------------------------------------------

    def cluster(self, project, zone, itype, name, status, **kw):
        """An InfiniBand cluster of ``itype`` in ``zone``, made directly (no task)."""
        return VirtualCluster.objects.create(
            project=project,
            name=name,
            zone=zone,
            instance_type=itype,
            fabric_type=FabricType.INFINIBAND,
            status=status,
            **kw,
        )

    def bench_attach(self, project, zone, itype):
        cluster = self.cluster(project, zone, itype, "attach-target", ClusterStatus.UNALLOCATED)
        vms = self.vms(project, zone, itype, "free", ATTACH_MANY)
        ids = [vm.pk for vm in vms]
        attach = f"/clusters/{cluster.pk}/attach/"

        def detach_all():
            VirtualMachine.objects.filter(pk__in=ids).update(cluster=None)

        queries = {}
        for n in (16, ATTACH_MANY):
            with CaptureQueriesContext(connection) as captured:
                self.post(attach, {"vm": ids[:n]})
            queries[n] = len(captured)
            detach_all()
        bulk = []
        for _ in range(self.opts["rounds"] + 2):
            bulk.append(self.post(attach, {"vm": ids}))
            detach_all()
        single = []
        for i in range(self.opts["rounds"] * 4 + 2):
            vm_id = ids[i % len(ids)]
            single.append(
                self.post(f"/vms/{vm_id}/cluster/", {"action": "attach", "cluster": cluster.pk})
            )
            detach_all()
        per_vm = (queries[ATTACH_MANY] - queries[16]) / (ATTACH_MANY - 16)
        bulk_ms, single_ms = self.median(bulk[2:]), self.median(single[2:])
        return {
            "attach_bulk_ms": bulk_ms,
            "attach_single_ms": single_ms,
            "attach_ratio": bulk_ms / (ATTACH_MANY * single_ms),
            "attach_queries": queries,
            "attach_queries_per_vm": per_vm,
            "attach_queries_constant": queries[ATTACH_MANY] - per_vm * ATTACH_MANY,
        }

    def bench_start(self, project, zone, itype, capacity, user):
        cluster = self.cluster(
            project, zone, itype, "start-target", ClusterStatus.RUNNING, created_by=user
        )
        SimulatorAllocation.objects.create(
            cluster=cluster, capacity=capacity[FabricType.INFINIBAND], nodes=START_MANY,
            configured=True,
        )  # fmt: skip
        vms = self.vms(project, zone, itype, "member", START_MANY, cluster=cluster)
        members = VirtualMachine.objects.filter(cluster=cluster)

        def reset():
            members.update(status=VmStatus.STOPPED)
            app.control.purge()

        bulk = []
        with CaptureQueriesContext(connection) as captured:
            bulk.append(self.post(f"/clusters/{cluster.pk}/members/start/", {}))
        start_queries = len(captured)
        reset()
        for _ in range(self.opts["rounds"]):
            bulk.append(self.post(f"/clusters/{cluster.pk}/members/start/", {}))
            reset()
        single = []
        for i in range(self.opts["rounds"] * 2 + 2):
            single.append(self.post(f"/vms/{vms[i].pk}/start/", {}))
            reset()
        # The poll of a 256-item Operation still running, against the floor view.
        self.post(f"/clusters/{cluster.pk}/members/start/", {})
        operation = Operation.objects.filter(cluster=cluster).latest("pk")
        poll_path = f"/clusters/operations/{operation.pk}/"
        poll, floor = [], []
        for _ in range(self.opts["rounds"] * 5 + 5):
            poll.append(self.get(poll_path))
            floor.append(self.get("/__bench__/floor/"))
        with CaptureQueriesContext(connection) as captured:
            self.get(poll_path)
        poll_queries = len(captured)
        reset()
        bulk_ms, single_ms = self.median(bulk[1:]), self.median(single[2:])
        poll_ms, floor_ms = self.median(poll[5:]), self.median(floor[5:])
        return {
            "start_bulk_ms": bulk_ms,
            "start_single_ms": single_ms,
            "start_ratio": bulk_ms / single_ms,
            "start_queries": start_queries,
            "poll_ms": poll_ms,
            "floor_ms": floor_ms,
            "poll": poll_ms / floor_ms,
            "poll_queries": poll_queries,
        }

    @staticmethod
    def median(seconds):
        return statistics.median(seconds) * 1000

    def report(self, r):
        q = r["attach_queries"]
        self.say(f"attach {ATTACH_MANY} in one request  {r['attach_bulk_ms']:8.1f} ms")
        self.say(f"one attach (VM page)          {r['attach_single_ms']:8.1f} ms")
        self.say(
            f"  ratio bulk / ({ATTACH_MANY} x single)  {r['attach_ratio']:.3f}"
            f"  (target <= {TARGETS['attach_ratio']})"
        )
        self.say(
            f"  queries: 16 VMs {q[16]}, {ATTACH_MANY} VMs {q[ATTACH_MANY]}:"
            f" {r['attach_queries_per_vm']:.2f} per VM + {r['attach_queries_constant']:.0f}"
            f"  (target <= {TARGETS['attach_queries_per_vm']} per VM)"
        )
        self.say(f"멤버 모두 시작 ({START_MANY})        {r['start_bulk_ms']:8.1f} ms")
        self.say(f"  queries {r['start_queries']}")
        self.say(f"one VM start                  {r['start_single_ms']:8.1f} ms")
        self.say(f"  ratio {r['start_ratio']:.2f}  (target <= {TARGETS['start_ratio']})")
        self.say(
            f"progress poll ({START_MANY} items)   {r['poll_ms']:8.2f} ms,"
            f" floor {r['floor_ms']:.2f} ms: {r['poll']:.2f}x"
            f" ({r['poll_queries']} queries; target <= {TARGETS['poll']}x)"
        )
        failed = [key for key, limit in TARGETS.items() if r[key] > limit]
        self.say("targets: " + ("all met" if not failed else "MISSED " + ", ".join(failed)))
