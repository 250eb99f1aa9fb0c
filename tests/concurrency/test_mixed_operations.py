"""The rules under load (docs/rules.md#concurrency): hundreds of conflicting operations from
real threads, each with its own PostgreSQL connection and transactions, then the invariants.

Tasks run eagerly (tests/settings.py), so each start/stop walks its transitional steps in
the thread that asked for it, after its commit — interleaved with the other threads' locks.
Eager task errors are made to propagate so a failing step cannot hide.
"""

import logging
import random
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from clusters import progress as cluster_progress
from clusters import services as cluster_services
from clusters.models import ClusterStatus, VirtualCluster
from portal.celery import app
from portal.foundation.errors import RuleViolation
from portal.models import AuditEvent
from tests.concurrency.invariants import structural_problems
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine, VmStatus

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 7  # + the reconciler or the main thread: the pool's 8 connections


@dataclass(frozen=True)
class Op:
    kind: str
    actor: str
    vm: int | None = None
    cluster: int | None = None

    AUDITED_AS = {
        "attach": "vm.attach",
        "detach": "vm.detach",
        "start": "cluster.start",
        "stop": "cluster.stop",
        "delete": "cluster.delete",
        "vm_start": "vm.start",
        "vm_stop": "vm.stop",
    }

    def run(self, actor):
        calls = {
            "attach": (cluster_services.attach_vm, self.vm, self.cluster),
            "detach": (cluster_services.detach_vm, self.vm),
            "start": (cluster_services.start_cluster, self.cluster),
            "stop": (cluster_services.stop_cluster, self.cluster),
            "delete": (cluster_services.delete_cluster, self.cluster),
            "vm_start": (vm_services.start_vm, self.vm),
            "vm_stop": (vm_services.stop_vm, self.vm),
        }
        service, *args = calls[self.kind]
        return service(*args, actor=actor)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def eager_errors_propagate():
    """Eager task errors surface in the calling thread; and if a commit hook is ever made
    robust (on_commit(..., robust=True) logs instead of raising), its errors still fail."""
    saved = app.conf.task_eager_propagates
    app.conf.task_eager_propagates = True
    hooks = _Collect()
    logger = logging.getLogger("django.db.backends.base")
    logger.addHandler(hooks)
    yield
    logger.removeHandler(hooks)
    app.conf.task_eager_propagates = saved
    assert not hooks.records, [r.getMessage() for r in hooks.records[:3]]


@pytest.fixture
def arena(world):
    """Six clusters (two of them may be deleted), 14 eligible VMs, and two that never are."""
    world.capacity(10_000)
    clusters = [world.cluster(f"arena-{i}") for i in range(6)]
    vms = [world.vm(f"node-{i:02d}") for i in range(14)]
    # Give some clusters members from the start, so starts and stops happen early.
    for cluster, members in zip(clusters[:3], (vms[0:3], vms[3:5], vms[5:7]), strict=True):
        for vm in members:
            cluster_services.attach_vm(vm.pk, cluster.pk, actor=None)
    cluster_services.start_cluster(clusters[0].pk, actor=None)  # eager: runs to 실행중
    ineligible = [
        world.vm("spot-node", billing_type=BillingType.SPOT),
        world.vm("other-type", instance_type=world.l40s),
    ]
    AuditEvent.objects.all().delete()  # count only what the threads do
    return world, clusters, vms + ineligible


def plan(seed, clusters, vms, count):
    rng = random.Random(seed)
    doomed = [c.pk for c in clusters[4:]]  # deletes aim here, so the arena stays populated
    kinds = ["attach"] * 25 + ["detach"] * 15 + ["start"] * 12 + ["stop"] * 12
    kinds += ["vm_start"] * 16 + ["vm_stop"] * 16 + ["delete"] * 3
    actors = ["admin"] * 6 + ["operator"] * 3 + ["viewer"]
    ops = []
    for _index in range(count):
        kind = rng.choice(kinds)
        cluster = rng.choice(doomed) if kind == "delete" else rng.choice(clusters).pk
        ops.append(Op(kind, rng.choice(actors), vm=rng.choice(vms).pk, cluster=cluster))
    return ops


def run_in_threads(ops, threads=THREADS, seed=0):
    """Spread ``ops`` over threads that start together; every outcome, and what went wrong."""
    barrier = threading.Barrier(threads)
    outcomes, unexpected = [], []
    guard = threading.Lock()
    User = get_user_model()

    def worker(chunk, jitter):
        try:
            # Each thread is its own "request": its own user objects and permission caches.
            users = {
                u.username: u
                for u in User.objects.filter(username__in=["admin", "operator", "viewer"])
            }
            barrier.wait(timeout=30)
            for op in chunk:
                time.sleep(jitter.random() * 0.003)
                try:
                    op.run(users[op.actor])
                    result = "ok"
                except RuleViolation as exc:
                    result = type(exc).__name__
                except Exception:  # anything untyped is the bug we look for
                    result = "UNEXPECTED"
                    unexpected.append((op, traceback.format_exc()))
                with guard:
                    outcomes.append((op, result))
        finally:
            connection.close()

    # The psycopg pool holds DB_POOL_MAX (8) connections: give the main thread's back first.
    connection.close()
    chunks = [ops[i::threads] for i in range(threads)]
    workers = [
        threading.Thread(target=worker, args=(chunk, random.Random(seed * 100 + i)))
        for i, chunk in enumerate(chunks)
    ]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in workers), "a thread hung (deadlock?)"
    return outcomes, unexpected


def check_invariants(attempts):
    problems = structural_problems()
    # Every attempt audited: one user event per call, whatever its outcome.
    user_events = Counter(
        AuditEvent.objects.filter(actor__isnull=False).values_list("action", flat=True)
    )
    expected = Counter(Op.AUDITED_AS[op.kind] for op in attempts)
    if user_events != expected:
        problems.append(f"audit events {dict(user_events)} != attempts {dict(expected)}")
    return problems


def free_vms(world):
    """Eligible VMs in no cluster, as the database has them now."""
    return list(
        VirtualMachine.objects.filter(
            cluster__isnull=True, instance_type=world.h100, billing_type=BillingType.ON_DEMAND
        ).order_by("pk")
    )


def with_a_start_that_cannot_lose(world, ops):
    """``ops`` with a start of a cluster no other op aims at, then a start of its member,
    both first in thread 0: amid the storm (their steps take the same locks and capacity
    rows as everyone's) a cluster reaches 실행중 and a member starts, whatever the timing."""
    reserved = world.cluster("reserved")
    first, _second = world.members(reserved, 2)
    AuditEvent.objects.all().delete()  # the members' attaches are not the threads' doing
    head = [Op("start", "admin", cluster=reserved.pk), Op("vm_start", "admin", vm=first.pk)]
    return [head[0], *ops[: THREADS - 1], head[1], *ops[THREADS - 1 :]], head


def unresolved_starts():
    """(cluster id, event id) of each start that returned, then neither reached 실행중
    nor was stopped.

    With no backend faults and ample capacity, a start a thread was told succeeded ends in
    ``cluster.running`` unless a later stop of the same cluster superseded it."""
    succeeded = AuditEvent.Outcome.SUCCEEDED
    events = AuditEvent.objects.filter(
        action__in=["cluster.start", "cluster.running", "cluster.stop"]
    ).order_by("id")
    pending = {}
    for event in events:
        if event.action == "cluster.start" and event.outcome == succeeded:
            pending[event.cluster_id] = event.pk
        elif event.action == "cluster.running" or (
            event.action == "cluster.stop" and event.outcome == succeeded
        ):
            pending.pop(event.cluster_id, None)
    return sorted(pending.items())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mixed_conflicting_operations_keep_every_rule(arena, eager_errors_propagate, seed):
    world, clusters, vms = arena
    ops, head = with_a_start_that_cannot_lose(world, plan(seed, clusters, vms, count=240))
    outcomes, unexpected = run_in_threads(ops, seed=seed)

    assert not unexpected, "untyped errors came out of the services:\n" + "\n".join(
        f"{op}:\n{tb}" for op, tb in unexpected[:3]
    )
    assert len(outcomes) == len(ops)
    results = Counter(result for _op, result in outcomes)
    # The mix really conflicts: plenty of wins and plenty of refusals.
    assert results["ok"] >= 30, results
    assert sum(n for r, n in results.items() if r != "ok") >= 30, results
    assert check_invariants(ops) == []
    # A cluster reached 실행중 and a member of it started amid the storm (by construction),
    # and every start that any thread was told succeeded finished or was stopped.
    assert [result for op, result in outcomes if op in head] == ["ok", "ok"], outcomes[:2]
    assert AuditEvent.objects.filter(action="cluster.running", cluster_id=head[0].cluster).exists()
    assert AuditEvent.objects.filter(action="vm.running", target_id=head[1].vm).exists()
    assert unresolved_starts() == []


def test_double_attach_storm_on_one_vm(arena, eager_errors_propagate):
    """Every thread attaches the same VM to a different cluster at once: one membership."""
    world, clusters, vms = arena
    vm = free_vms(world)[0]
    targets = list(VirtualCluster.objects.filter(status=ClusterStatus.UNALLOCATED)) * 10
    ops = [Op("attach", "admin", vm=vm.pk, cluster=c.pk) for c in targets[:40]]
    outcomes, unexpected = run_in_threads(ops)
    assert not unexpected
    assert Counter(r for _op, r in outcomes)["ok"] == 1
    assert check_invariants(ops) == []


def test_start_stop_detach_storm_on_one_cluster(arena, eager_errors_propagate):
    """Starts, stops, detaches and member starts all aimed at one cluster."""
    world, clusters, vms = arena
    cluster = clusters[1]  # two members
    members = list(VirtualMachine.objects.filter(cluster=cluster))
    spare = free_vms(world)[:3]
    rng = random.Random(7)
    ops = []
    for _index in range(200):
        kind = rng.choice(["start", "stop", "detach", "attach", "vm_start", "vm_stop"])
        vm = rng.choice(members + spare).pk
        ops.append(Op(kind, "admin", vm=vm, cluster=cluster.pk))
    outcomes, unexpected = run_in_threads(ops)
    assert not unexpected, unexpected[:2]
    assert check_invariants(ops) == []
    cluster.refresh_from_db()
    if cluster.status == ClusterStatus.RUNNING:
        assert cluster.members.count() >= 2


def test_reconcile_running_concurrently_with_users(arena, eager_errors_propagate, settings):
    """The reconciler (beat) runs while users act: it must not break a rule either."""
    world, clusters, vms = arena
    settings.TRANSITION_TIMEOUT_SECONDS = 0
    ops = plan(11, clusters, vms, count=120)
    stop = threading.Event()
    reconciler_errors = []

    def reconcile_loop():
        try:
            while not stop.is_set():
                try:
                    cluster_progress.reconcile()
                except RuleViolation:
                    pass
                except Exception:
                    reconciler_errors.append(traceback.format_exc())
                time.sleep(0.005)
        finally:
            connection.close()

    connection.close()
    thread = threading.Thread(target=reconcile_loop)
    thread.start()
    try:
        outcomes, unexpected = run_in_threads(ops, threads=6)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not unexpected, unexpected[:2]
    assert not reconciler_errors, reconciler_errors[:2]
    assert check_invariants(ops) == []


def test_vm_stop_start_flapping_keeps_vm_consistent(arena, eager_errors_propagate):
    world, clusters, vms = arena
    running = clusters[0]
    member = VirtualMachine.objects.filter(cluster=running).first()
    ops = [
        Op(kind, "operator", vm=member.pk, cluster=running.pk)
        for kind in ["vm_start", "vm_stop"] * 60
    ]
    random.Random(3).shuffle(ops)
    outcomes, unexpected = run_in_threads(ops)
    assert not unexpected, unexpected[:2]
    member.refresh_from_db()
    assert member.status in (VmStatus.RUNNING, VmStatus.STOPPED)
    assert check_invariants(ops) == []


def _lock_waiters():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def _wait_for_waiters(count, timeout=10):
    deadline = time.monotonic() + timeout
    while _lock_waiters() < count:
        assert time.monotonic() < deadline, f"expected {count} transactions waiting on locks"
        time.sleep(0.01)


def test_membership_change_under_a_waiting_vm_lock_does_not_deadlock(world):
    """The interleaving behind the deadlocks the mixed runs hit (fixed in
    ``lock_vm_with_cluster``), made deterministic so it cannot come back unnoticed.

    1. A transaction attaches VM v to cluster C and holds both rows.
    2. ``start_vm(v)`` peeks (v is in no cluster yet), then waits for v's row.
    3. ``start_cluster(C)`` waits for C's row; once it has it, it locks C's members, v among them.
    4. The attach commits: start_vm gets v, sees C, and asks for C while holding v;
       start_cluster holds C and asks for v.
    """
    cluster = world.cluster("deadlock")
    world.members(cluster, 2)
    vm = world.vm("late-member")
    holding, release = threading.Event(), threading.Event()
    results = {}

    def attach_and_hold():
        try:
            with transaction.atomic():
                VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
                locked = VirtualMachine.objects.select_for_update().get(pk=vm.pk)
                locked.cluster_id = cluster.pk
                locked.save(update_fields=["cluster"])
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    def call(name, fn):
        try:
            fn()
            results[name] = "ok"
        except RuleViolation as exc:
            results[name] = type(exc).__name__
        except Exception as exc:
            results[name] = f"UNEXPECTED {type(exc).__name__}: {exc}"
        finally:
            connection.close()

    admin = world.admin
    connection.close()
    holder = threading.Thread(target=attach_and_hold)
    holder.start()
    assert holding.wait(10)
    vm_start = threading.Thread(
        target=call, args=("vm_start", lambda: vm_services.start_vm(vm.pk, actor=admin))
    )
    vm_start.start()
    _wait_for_waiters(1)
    cluster_start = threading.Thread(
        target=call,
        args=("start", lambda: cluster_services.start_cluster(cluster.pk, actor=admin)),
    )
    cluster_start.start()
    _wait_for_waiters(2)
    release.set()
    for t in (holder, vm_start, cluster_start):
        t.join(timeout=30)
    assert not any(r.startswith("UNEXPECTED") for r in results.values()), results
