"""What a 교체 must leave once everything has settled, whoever it raced: shared by the races
(``test_replace_races.py``, ``test_replace_lock_order.py``) and the killed workers
(``tests/faults/test_replace_worker_killed.py``). Everything here decides by state."""

import threading
from collections import Counter
from contextlib import contextmanager, nullcontext

from django.db import connection, transaction

from clusters import services
from clusters.holds import holding_replace
from clusters.models import STABLE, ClusterStatus, Operation, OperationItem, VirtualCluster
from portal.models import AuditEvent
from tests.concurrency.invariants import structural_problems
from tests.waiting import wait_until
from vms import services as vm_services
from vms.models import VM_TRANSITIONAL, VirtualMachine, VmStatus

Item = OperationItem.Status
OK = AuditEvent.Outcome.SUCCEEDED


def running_cluster(world, name="swap", size=3, commits=nullcontext):
    """A RUNNING cluster of ``size`` running members at ranks 0…, made through the services
    (at once when tasks are eager, else by the worker, waited for by state). ``commits``:
    what runs their tasks in a test inside one transaction (its on-commit callbacks)."""
    world.capacity(64)
    cluster = world.cluster(name)
    members = [world.vm(f"{name}-{i}") for i in range(size)]
    with commits():
        for vm in members:
            services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
        services.start_cluster(cluster.pk, actor=world.admin)
    running = VirtualCluster.objects.filter(pk=cluster.pk, status=ClusterStatus.RUNNING)
    wait_until(running.exists, 60, what="the cluster to run")
    with commits():
        for vm in members:
            vm_services.start_vm(vm.pk, actor=world.admin)
    wait_until(lambda: not cluster.members.exclude(status=VmStatus.RUNNING).exists(), 60)
    return running.get(), [VirtualMachine.objects.get(pk=vm.pk) for vm in members]


def ranks_of(cluster):
    """{member pk: node_rank} of ``cluster`` now."""
    return dict(cluster.members.values_list("pk", "node_rank"))


def settled():
    """Nothing is on its way: no open operation, no VM or cluster in a transition."""
    return not (
        Operation.objects.open().exists()
        or VirtualMachine.objects.filter(status__in=VM_TRANSITIONAL).exists()
        or VirtualCluster.objects.exclude(status__in=STABLE).exists()
    )


def wait_settled(timeout=60):
    wait_until(settled, timeout, interval=0.05, what="every operation and VM to settle")


def _events(action, **filters):
    return AuditEvent.objects.filter(action=action, outcome=OK, **filters).count()


def _operation_problems(operation):
    items = list(operation.items.order_by("position"))
    problems = [] if operation.done else [f"{operation} left open"]
    for item in items:
        if item.status == Item.PENDING:
            problems.append(f"{operation} item {item.position} left pending")
        if item.status == Item.FAILED and not item.error_code:
            problems.append(f"{operation} item {item.position} failed with no reason")
    if any(item.status == Item.FAILED for item in items) and not operation.error_code:
        problems.append(f"{operation} failed with no reason")
    return problems


def _swap_problems(operation, cluster, rank_before, left):
    """One replace: fully in (the spare at the member's rank, the member out, both audited)
    or fully out (the spare not in the cluster, the member at its rank unless a detach of
    its own took it out)."""
    member_item, spare_item = operation.items.order_by("position").select_related("vm")
    member, spare = member_item.vm, spare_item.vm
    rank = rank_before[member.pk]
    joined = _events("vm.attach", target_id=spare.pk, cluster_id=cluster.pk)
    problems = []
    if member_item.status == Item.SUCCEEDED:
        if (spare.cluster_id, spare.node_rank) != (cluster.pk, rank):
            problems.append(f"{operation}: spare {spare.name} not at rank {rank}")
        if member.cluster_id is not None:
            problems.append(f"{operation}: replaced {member.name} still a member")
        if joined != 1 or left[member.pk] != 1:
            problems.append(f"{operation}: {joined} attach / {left[member.pk]} detach events")
        if spare_item.error_code == "not_member" and spare.cluster_id == cluster.pk:
            problems.append(f"{operation}: spare {spare.name} failed as no member, is one")
        if spare_item.status == Item.SUCCEEDED and cluster.status == ClusterStatus.RUNNING:
            if spare.status != VmStatus.RUNNING:
                problems.append(f"{operation} succeeded, spare {spare.name} is {spare.status}")
    else:
        if spare.cluster_id == cluster.pk or joined:
            problems.append(f"{operation} failed but spare {spare.name} joined")
        if spare_item.status != Item.FAILED:
            problems.append(f"{operation}: spare item {spare_item.status} after a failed swap")
        if left[member.pk] == 0 and (member.cluster_id, member.node_rank) != (cluster.pk, rank):
            problems.append(f"{operation}: {member.name} lost rank {rank} with no detach")
    if holding_replace(spare) is not None:
        problems.append(f"{operation} still holds {spare.name}")
    return problems


def replace_problems(cluster, rank_before):
    """Every broken promise of the replaces of ``cluster`` once all has settled, as sentences:
    the structural invariants, every rank held by one member at most and each old rank by
    exactly one unless a detach freed it, every operation and item terminal with a reason,
    each replace fully in or fully out with the audit events to match, no hold left."""
    cluster = VirtualCluster.objects.get(pk=cluster.pk)
    problems = list(structural_problems())
    members = list(cluster.members.all())
    held = Counter(vm.node_rank for vm in members)
    problems += [f"rank {rank} held by {n}" for rank, n in held.items() if n > 1 or rank is None]
    left = Counter(
        AuditEvent.objects.filter(action="vm.detach", outcome=OK, cluster_id=cluster.pk)
        .values_list("target_id", flat=True)
        .iterator()
    )
    for vm_id, rank in rank_before.items():
        holders = held[rank]
        if holders != 1 and not (holders == 0 and left[vm_id]):
            problems.append(f"rank {rank} held by {holders} with no detach to free it")
    replaces = Operation.objects.filter(cluster=cluster, kind=Operation.Kind.REPLACE)
    for operation in Operation.objects.filter(cluster=cluster):
        problems += _operation_problems(operation)
    for operation in replaces:
        problems += _swap_problems(operation, cluster, rank_before, left)
    accepted = _events("operation.replace", target_id=cluster.pk)
    if accepted != replaces.count():
        problems.append(f"{accepted} accepted replaces audited, {replaces.count()} made")
    open_holds = OperationItem.objects.filter(
        operation__kind=Operation.Kind.REPLACE, position=1, status=Item.PENDING
    )
    problems += [f"hold left on {item.target_name}" for item in open_holds]
    return problems


def backend_pid():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def blocked_by(pid):
    """How many database sessions wait for a lock that session ``pid`` holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [pid]
        )
        return cursor.fetchone()[0]


def lock_waiters():
    """How many sessions of this database wait for a lock now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


class RowLock:
    """A row held ``FOR UPDATE`` by a transaction on a connection of its own (a thread), so
    that whoever asks for it waits: a worker's next step held at its first lock."""

    def __init__(self, model, pk):
        self.model, self.pk = model, pk
        self.pid = None
        self._held, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self):
        try:
            with transaction.atomic():
                list(self.model.objects.select_for_update().filter(pk=self.pk))
                self.pid = backend_pid()
                self._held.set()
                self._release.wait(120)
        finally:
            connection.close()

    def take(self):
        self._thread.start()
        assert self._held.wait(30), "the row lock was never taken"
        return self

    def wait_for_waiter(self, what="a step waiting for the held row"):
        wait_until(lambda: blocked_by(self.pid) >= 1, 60, what=what)

    def release(self):
        self._release.set()
        self._thread.join(30)


@contextmanager
def row_lock(model, pk):
    lock = RowLock(model, pk).take()
    try:
        yield lock
    finally:
        lock.release()
