"""Talking to the broker without letting its failures become the user's.

A change the user made is committed before its task is sent (``queue_after_commit``): if
the broker cannot take the message, the change still stands and the reconciler (its own
worker's queue, ``RECONCILE_QUEUE``) finishes the step later. So a failed send is a
warning, never a 500.

On the embedded ``filesystem://`` broker the "broker" is three folders under
``var/celery``; a folder that went missing is made again before each publish and by
``/healthz``, so moving ``var/celery/queue`` away heals on the next message.
"""

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis.exceptions
from celery import Task, current_app
from django.db import OperationalError as DatabaseError
from kombu.exceptions import ChannelError, ConnectionError, OperationalError

log = logging.getLogger(__name__)

# What a publish raises when the broker (not our code) fails: kombu's connection errors,
# the filesystem transport's ChannelError and raw OSError (a missing or unwritable folder),
# and redis-py's connection errors when they reach us unwrapped.
BROKER_ERRORS = (
    OperationalError,
    ConnectionError,
    ChannelError,
    OSError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
FOLDER_OPTIONS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
# A task that takes primary keys and may run twice: acked late and requeued if its worker
# dies, retried while the database is away (the reconciler repairs what is left).
IDEMPOTENT: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (DatabaseError,),
    "retry_backoff": 2,
    "retry_backoff_max": 30,
    "max_retries": 5,
}


def broker_url() -> str:
    """The URL tasks are published to (Celery prefers the environment over settings)."""
    conf = current_app.conf
    return conf.broker_write_url or conf.broker_url


def is_filesystem() -> bool:
    return urlsplit(broker_url()).scheme == "filesystem"


def filesystem_folders() -> list[Path]:
    """The folders of the filesystem transport, from its transport options."""
    options = current_app.conf.broker_transport_options or {}
    return [Path(options[key]) for key in FOLDER_OPTIONS if options.get(key)]


def ensure_folders() -> None:
    """Make the filesystem transport's folders if they are missing (no-op on other brokers).

    Raises OSError when they cannot be made (a file in the way, no permission).
    """
    if is_filesystem():
        for folder in filesystem_folders():
            folder.mkdir(parents=True, exist_ok=True)


def publish(task: Task | str, *args) -> bool:
    """Send ``task(*args)``; on a broker failure log a warning and return False.

    ``task`` may be a task's name (``"clusters.tasks.watch"``): a module whose work an app's
    ``tasks.py`` wraps cannot import that module back, so it queues the task by name.

    Only broker-side errors are caught: a bug in our code (a bad argument, an encoding
    error) still raises.
    """
    if isinstance(task, str):
        if task not in current_app.tasks:
            current_app.loader.import_default_modules()  # the apps' tasks.py, autodiscovered
        task = current_app.tasks[task]
    try:
        task.delay(*args)
    except BROKER_ERRORS:
        log.warning(
            "broker unavailable: %s%r left to the reconciler", task.name, args, exc_info=True
        )
        return False
    return True


def check() -> str:
    """``"ok"`` when the broker can accept a message now, else ``"error: <why>"``."""
    try:
        if is_filesystem():
            ensure_folders()
            unwritable = [f for f in filesystem_folders() if not os.access(f, os.W_OK | os.X_OK)]
            if unwritable:
                return f"error: {unwritable[0]} is not writable"
        else:
            with current_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
    except BROKER_ERRORS as exc:
        return f"error: {type(exc).__name__}"
    return "ok"
