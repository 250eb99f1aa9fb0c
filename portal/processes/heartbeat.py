"""The worker's heartbeat: proof that a worker *consumed* a task recently.

A worker whose main process is alive can still be useless (its prefork pool wedged after a
child was SIGKILLed, its broker folder gone), and a broker that answers a ping says nothing
about that. So every task a worker runs stamps the heartbeat (``task_postrun``, wired in
``portal.celery``) and beat queues ``portal.tasks.heartbeat`` every ``WORKER_HEARTBEAT_SECONDS`` so
an idle worker stamps it too. ``/healthz`` and ``rundemo``'s supervisor read its age.

The stamp lives next to the queue, where every process of the stack already looks: a file
in ``var/celery`` on the filesystem broker, a key in the broker's Redis on Redis. Other
brokers (the tests' ``memory://``) keep no heartbeat: ``/healthz`` then reports no worker.
"""

import functools
import time
from pathlib import Path
from urllib.parse import urlsplit

import redis
from celery import current_app

from portal.foundation import broker

KEY = "portal:worker-heartbeat"
FILENAME = "worker-heartbeat"


def _file() -> Path:
    options = current_app.conf.broker_transport_options or {}
    return Path(options["data_folder_in"]).parent / FILENAME


@functools.lru_cache(maxsize=4)
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _on_redis() -> bool:
    return urlsplit(broker.broker_url()).scheme in {"redis", "rediss"}


def touch() -> None:
    """Record that a worker consumed a task just now."""
    if broker.is_filesystem():
        path = _file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    elif _on_redis():
        _redis(broker.broker_url()).set(KEY, repr(time.time()))


def age() -> float | None:
    """Seconds since a worker last consumed a task; None if none ever did.

    Raises one of ``broker.BROKER_ERRORS`` when the broker cannot be read.
    """
    if broker.is_filesystem():
        try:
            stamped = _file().stat().st_mtime
        except FileNotFoundError:
            return None
    elif _on_redis():
        value = _redis(broker.broker_url()).get(KEY)
        if value is None:
            return None
        stamped = float(value)
    else:
        return None
    return max(0.0, time.time() - stamped)
