"""The whole Celery side of the portal as real processes: a worker, the reconciler's worker
and beat under ``portal.processes.supervisor`` (as ``rundemo`` runs them), on the test database and
either broker."""

import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

from celery import current_app
from django.conf import settings

from clusters.models import TRANSITIONAL as CLUSTER_TRANSITIONAL
from portal.processes import heartbeat
from portal.processes.supervisor import Child, Supervisor
from tests.faults.harness import (
    BASE_DIR,
    Worker,
    broker,
    celery_env,
    children_of,
    filesystem_options,
    wait_until,
)
from vms import services as vm_services
from vms.models import VM_TRANSITIONAL, VirtualMachine, VmStatus

RECONCILE_QUEUE = settings.RECONCILE_QUEUE
# Short enough for a fast suite, long enough for a loaded 2-core machine.
TRANSITION_TIMEOUT = 2.5
RECONCILE_EVERY = 2.0
STEP_SECONDS = 0.2
HEARTBEAT_EVERY = 0.5
HEARTBEAT_MAX_AGE = 2.5
# A worker's boot on a loaded 2-core machine can take longer than HEARTBEAT_MAX_AGE: it is
# not a stall (the supervisor would kill every fresh worker before its first task).
STARTUP_GRACE = 60.0
# No cluster or VM stays transitional longer than this, whatever single process is killed.
BOUND = TRANSITION_TIMEOUT + 2 * RECONCILE_EVERY
STACK_ENV = {
    "TRANSITION_TIMEOUT_SECONDS": TRANSITION_TIMEOUT,
    "RECONCILE_EVERY_SECONDS": RECONCILE_EVERY,
    "SIMULATOR_STEP_SECONDS": STEP_SECONDS,
    "WORKER_HEARTBEAT_SECONDS": HEARTBEAT_EVERY,
    "WORKER_HEARTBEAT_MAX_AGE_SECONDS": HEARTBEAT_MAX_AGE,
}


class Stack:
    def __init__(
        self, broker_url, workdir, concurrency=2, heartbeat_max_age=HEARTBEAT_MAX_AGE, **env
    ):
        self.broker_url = broker_url
        self.workdir = Path(workdir)
        self.var_dir = self.workdir / "var"
        self.logs = {}
        worker = Worker(broker_url, workdir, concurrency=concurrency, var_dir=self.var_dir)
        beat = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "beat",
            "--loglevel=INFO",
            "--schedule",
            str(self.var_dir / "celerybeat-schedule"),
        ]
        reconciler = Worker(broker_url, workdir, var_dir=self.var_dir, queue=RECONCILE_QUEUE)
        self.supervisor = Supervisor(
            [
                Child("worker", worker.command(), watch_heartbeat=True),
                Child("reconciler", reconciler.command()),
                Child("beat", beat),
            ],
            env=celery_env(
                broker_url,
                self.var_dir,
                **{**STACK_ENV, "WORKER_HEARTBEAT_MAX_AGE_SECONDS": heartbeat_max_age, **env},
            ),
            cwd=BASE_DIR,
            output=self._log_file,
            heartbeat_age=heartbeat.age,
            heartbeat_max_age=heartbeat_max_age,
            startup_grace=STARTUP_GRACE,
            interval=0.2,
        )

    def _log_file(self, child):
        path = self.workdir / f"{child.name}-{child.restarts}.log"
        self.logs.setdefault(child.name, []).append(path)
        return open(path, "w")  # the child owns it

    def output(self, name):
        return "".join(path.read_text(errors="replace") for path in self.logs.get(name, []))

    def pid(self, name):
        return self.supervisor.child(name).pid

    def pool(self):
        return children_of(self.pid("worker"))

    def start(self):
        spawned = time.time()
        self.supervisor.start()
        self.wait_consumed_since(spawned, "the worker's first heartbeat")
        wait_until(lambda: len(self.pool()) == 2, STARTUP_GRACE, what="the pool children")
        return self

    def consumed_since(self, moment: float) -> bool:
        """A worker stamped its heartbeat after ``moment`` (``time.time()``): it consumed a
        task since then. A stamp from before (a worker killed since, an earlier stack on the
        same broker) is not an answer."""
        age = heartbeat.age()
        return age is not None and time.time() - age > moment

    def wait_consumed_since(self, moment: float, what: str) -> None:
        """Wait for a heartbeat after ``moment``: decided by the stamp, bounded only by the
        supervisor's own startup grace (a worker not consuming by then is restarted)."""
        wait_until(lambda: self.consumed_since(moment), STARTUP_GRACE, interval=0.05, what=what)

    def stop(self):
        self.supervisor.stop(timeout=2)


@contextmanager
def running_stack(broker_url, workdir, **env):
    """This process publishing to ``broker_url`` and a supervised worker and beat on it
    (``env`` overrides STACK_ENV)."""
    options = filesystem_options(Path(workdir) / "var") if broker_url == "filesystem://" else {}
    with broker(current_app, broker_url, options):
        stack = Stack(broker_url, workdir, **env)
        try:
            yield stack.start()
        finally:
            stack.stop()


def transitional_seconds(read_states, timeout):
    """Poll ``read_states()`` (statuses) until none is transitional: how long some was."""
    transitional = set(CLUSTER_TRANSITIONAL) | set(VM_TRANSITIONAL)
    first = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if transitional & set(read_states()):
            first = first or time.monotonic()
        elif first is not None:
            return time.monotonic() - first
        time.sleep(0.05)
    raise AssertionError(f"still transitional after {timeout}s: {read_states()}")


def start_a_vm_through_the_worker(world, name="after"):
    """A fresh VM start runs to 실행중: new work reaches its end. Decided by the VM's status,
    bounded by the supervisor's startup grace, not by ``TRANSITION_TIMEOUT``: on a loaded
    machine (CI's real tier beside it) the worker's step can take longer than that, and the
    reconciler's worker finishing it is work flowing too. That the main worker consumes again
    is its heartbeat's to say (``Stack.wait_consumed_since``)."""
    vm = world.vm(name)
    vm_services.start_vm(vm.pk, actor=world.admin)
    wait_until(
        lambda: VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.RUNNING,
        STARTUP_GRACE,
        interval=0.05,
        what="a new VM start to run to 실행중",
    )


def start_in_a_web_process_that_dies_after_commit(stack, cluster, admin):
    """A separate "web" process starts the cluster and is SIGKILLed the moment its
    transaction commits, before the on-commit hook could queue the first step."""
    script = textwrap.dedent(
        f"""
        import os, signal, django
        django.setup()
        from django.db import transaction
        from clusters import services
        from django.contrib.auth import get_user_model
        admin = get_user_model().objects.get(pk={admin.pk})
        with transaction.atomic():
            # on-commit hooks run in order: this one first, the task never leaves.
            transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
            services.start_cluster({cluster.pk}, actor=admin)
        """
    )
    web = subprocess.run(
        [sys.executable, "-c", script],
        cwd=BASE_DIR,
        env=stack.supervisor.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert web.returncode == -signal.SIGKILL, web.stderr[-2000:]
