"""The Celery application: the lifecycles' transitions and the metrics rollups run here.

Worker and beat log as the web does: Django's ``LOGGING``, one line format with the request
id. A task carries the ids of the request (or task) that queued it in a message header, so the
worker's lines and audit events of a change name the click that caused it.
"""

import copy
import logging
import os
from typing import Any

from celery import Celery
from celery.signals import (
    beat_init,
    before_task_publish,
    setup_logging,
    task_postrun,
    task_prerun,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
REQUEST_IDS_HEADER = "vc_request_ids"


@setup_logging.connect
def _django_logging(loglevel=None, logfile=None, **_kwargs):
    """Django's LOGGING instead of Celery's own handlers (a receiver here stops Celery from
    replacing the root logger's). ``--loglevel`` sets the root level (in place of LOG_LEVEL;
    Celery's default is WARNING); ``--logfile`` takes the log lines that go to stderr
    otherwise, reopened when logrotate moves the file (what code prints is not logged)."""
    from django.conf import settings
    from django.utils.log import configure_logging

    config: Any = settings.LOGGING
    if logfile:
        config = copy.deepcopy(config)
        config["handlers"]["console"] = {
            **config["handlers"]["console"],
            "class": "logging.handlers.WatchedFileHandler",
            "filename": logfile,
            "encoding": "utf-8",
        }
    configure_logging(settings.LOGGING_CONFIG, config)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


@beat_init.connect
def _one_beat_at_a_time(**_kwargs):
    """Beat schedules only once it holds the schedule's lock (``portal.processes.beat_lock``):
    a second beat waits here until the first is gone."""
    from portal.processes import beat_lock

    beat_lock.acquire()


@before_task_publish.connect
def _ensure_broker_folders(**_kwargs):
    """Every publisher (web, worker, beat) remakes a filesystem broker folder gone missing."""
    from portal.foundation import broker

    broker.ensure_folders()


@before_task_publish.connect
def _carry_request_ids(headers=None, **_kwargs):
    from portal.foundation.request_ids import carried_ids

    ids = carried_ids()
    if ids is not None and headers is not None:
        headers[REQUEST_IDS_HEADER] = ids


@task_prerun.connect
def _adopt_request_ids(task=None, **_kwargs):
    """A task a worker runs takes the ids it was queued with; one applied in place (eager)
    already runs under its caller's."""
    from portal.foundation.request_ids import adopt_ids

    if task is not None and not task.request.is_eager:
        task.request.request_ids_token = adopt_ids(task.request.get(REQUEST_IDS_HEADER))


@task_postrun.connect
def _stamp_heartbeat(task=None, **_kwargs):
    """A task ran to its end in a worker: its pool consumes (``portal.tasks.heartbeat``).

    Not for a task applied in place (eager mode): that proves nothing about a worker; nor
    for one of the reconciler's own queue: its worker stamping would hide a wedged worker of
    the queue every change goes through.
    """
    from django.conf import settings

    from portal.processes import heartbeat as worker_heartbeat

    queue = (task.request.delivery_info or {}).get("routing_key") if task is not None else None
    if task is not None and not task.request.is_eager and queue != settings.RECONCILE_QUEUE:
        worker_heartbeat.touch()


@task_postrun.connect
def _forget_request_ids(task=None, **_kwargs):
    from portal.foundation.request_ids import forget_ids

    token = getattr(task.request, "request_ids_token", None) if task is not None else None
    if token is not None:
        forget_ids(token)
