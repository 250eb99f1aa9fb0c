"""A change a request queues is logged and audited in the worker under that request's id, and
the worker and beat log through Django's LOGGING, as the web does."""

import logging

import pytest
from celery.signals import task_prerun
from django.conf import settings
from django.urls import reverse

from clusters import operations
from clusters.models import ClusterStatus
from portal.celery import app
from portal.foundation.request_ids import adopt_ids, carried_ids, forget_ids, request_ids
from portal.models import AuditEvent
from tests.faults.harness import kept_logging, wait_until
from tests.pages import HX
from vms.models import VirtualMachine, VmStatus

SERVER_ID = "0123456789abcdef" * 2


@pytest.mark.parametrize(
    "carried",
    [
        None,
        SERVER_ID,
        [SERVER_ID],
        [SERVER_ID, "client", "more"],
        [SERVER_ID.upper(), ""],
        [SERVER_ID[:-1], ""],
        [SERVER_ID + "0", ""],
        ["../../etc/passwd", ""],
        [1234, ""],
        {"server": SERVER_ID, "client": ""},
    ],
)
def test_a_header_not_made_by_the_portal_sets_no_id(carried):
    assert adopt_ids(carried) is None
    assert request_ids() == ("", "")


@pytest.mark.parametrize(
    ("client", "kept"),
    [("cli-7", "cli-7"), ("a" * 100, "a" * 64), ("bad\x00id", ""), ("아이디", ""), (7, "")],
)
def test_ids_carried_into_a_task_are_those_of_the_request(client, kept):
    assert carried_ids() is None  # beat's schedule: nothing to carry
    token = adopt_ids([SERVER_ID, client])
    assert token is not None
    try:
        assert request_ids() == (SERVER_ID, kept)
        assert carried_ids() == [SERVER_ID, kept]
    finally:
        forget_ids(token)
    assert request_ids() == ("", "")


@pytest.fixture
def restored_logging():
    setup = type(app.log)._setup
    with kept_logging():
        yield
    type(app.log)._setup = setup


def test_worker_logging_is_djangos_with_celerys_level(restored_logging):
    type(app.log)._setup = False  # as a worker starting in a fresh process
    app.log.setup(loglevel="WARNING")
    root = logging.getLogger()
    assert root.level == logging.WARNING
    (handler,) = root.handlers  # Django's console handler, not one of Celery's own
    assert handler.formatter._fmt == settings.LOGGING["formatters"]["structured"]["format"]
    record = logging.LogRecord("clusters", logging.WARNING, __file__, 1, "x", None, None)
    assert handler.filter(record) and record.request_id == "-"


def test_a_worker_logfile_takes_the_same_lines(restored_logging, tmp_path):
    type(app.log)._setup = False
    app.log.setup(loglevel="INFO", logfile=str(tmp_path / "worker.log"))
    token = adopt_ids([SERVER_ID, ""])
    try:
        logging.getLogger("clusters.progress").info("a step")
        logging.getLogger("django.request").warning("a refusal")
    finally:
        forget_ids(token)
    for handler in logging.getLogger().handlers:
        handler.close()  # the test's file, not the suite's stderr: kept_logging puts that back
    lines = (tmp_path / "worker.log").read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        f"INFO clusters.progress request_id={SERVER_ID} a step",
        f"WARNING django.request request_id={SERVER_ID} a refusal",
    ]


def test_logging_is_as_it_was_once_an_in_process_worker_has_configured_it(restored_logging):
    root, django_logger = logging.getLogger(), logging.getLogger("django")
    before = (root.handlers[:], root.level, django_logger.handlers[:])
    with kept_logging():
        type(app.log)._setup = False
        app.log.setup(loglevel="ERROR")  # what each thread_worker's start does
        assert root.level == logging.ERROR and root.handlers != before[0]
    assert (root.handlers, root.level, django_logger.handlers) == before


@pytest.fixture
def tasks_run():
    """(task name, its arguments, request id) of each task the worker runs, as it starts."""
    seen = []

    def record(task=None, args=(), **_kwargs):
        seen.append((task.name, tuple(args), request_ids().server))

    task_prerun.connect(record, weak=False)
    yield seen
    task_prerun.disconnect(record)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_change_is_audited_in_the_worker_under_the_request_that_made_it(
    world, login, redis_worker, tasks_run
):
    world.capacity(10)
    cluster = world.cluster(status=ClusterStatus.RUNNING)
    members = world.members(cluster, 2)
    member_ids = [vm.pk for vm in members]
    running = VirtualMachine.objects.filter(pk__in=member_ids, status=VmStatus.RUNNING)

    response = login("operator").post(
        reverse("clusters:cluster_start_members", args=[cluster.pk]),
        HTTP_X_REQUEST_ID="operator-click-1",
        **HX,
    )
    assert response.status_code == 200
    rid = response["X-Request-ID"]
    wait_until(lambda: running.count() == 2, 60, interval=0.05, what="both members running")
    # The items ran in the worker (one task), each member then settled through tasks that
    # task queued: all under the request's id, and so are the items' audit events.
    assert {name for name, *_rest in tasks_run} >= {
        "clusters.tasks.run_items",
        "vms.tasks.advance_vm",
    }
    assert {request_id for *_rest, request_id in tasks_run} == {rid}
    started = AuditEvent.objects.filter(action="vm.start", target_id__in=member_ids)
    assert set(started.values_list("request_id", "client_request_id")) == {
        (rid, "operator-click-1")
    }

    # A change queued outside any request (as beat's are) runs under no id, in the same
    # worker thread that ran the tasks above.
    # The start's last look at its operation (queued under the request) may still come.
    tasks_run.clear()
    stop = operations.stop_members(cluster.pk, actor=world.admin)
    wait_until(lambda: not running.exists(), 60, interval=0.05, what="both members stopped")
    of_the_stop = [
        request_id
        for name, args, request_id in tasks_run
        if name != "clusters.tasks.watch" or args[0] == stop.pk
    ]
    assert of_the_stop and set(of_the_stop) == {""}
    stopped = AuditEvent.objects.filter(action="vm.stop", target_id__in=member_ids)
    assert set(stopped.values_list("request_id", flat=True)) == {""}
