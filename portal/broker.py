"""Talking to the broker without letting its failures become the user's.

A change the user made is committed before its task is sent (``queue_after_commit``): if
the broker cannot take the message, the change still stands and the reconciler (run by
beat, ``portal.beat``) finishes the step later. So a failed send is a warning, never a 500.

On the embedded ``filesystem://`` broker the "broker" is three folders under
``var/celery``; a folder that went missing is made again before each publish and by
``/healthz``, so moving ``var/celery/queue`` away heals on the next message.
"""

import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

import redis.exceptions
from celery import Task, current_app
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


def publish(task: Task, *args) -> bool:
    """Send ``task(*args)``; on a broker failure log a warning and return False.

    Only broker-side errors are caught: a bug in our code (a bad argument, an encoding
    error) still raises.
    """
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
