"""The Celery application: transitions of SPEC §4 and the metrics rollups run here."""

import os

from celery import Celery
from celery.signals import before_task_publish, task_postrun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@before_task_publish.connect
def _ensure_broker_folders(**_kwargs):
    """Every publisher (web, worker, beat) remakes a filesystem broker folder gone missing."""
    from portal import broker

    broker.ensure_folders()


@task_postrun.connect
def _stamp_heartbeat(task=None, **_kwargs):
    """A task ran to its end in a worker: its pool consumes (``portal.tasks.heartbeat``).

    Not for a task applied in place (eager mode, beat's reconciler): that proves nothing
    about a worker.
    """
    from portal import heartbeat as worker_heartbeat

    if task is not None and not task.request.is_eager:
        worker_heartbeat.touch()
