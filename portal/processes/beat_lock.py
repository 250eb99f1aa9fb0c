"""One beat at a time: beat schedules only while it holds the schedule's lock.

Run two or more beats (on two machines, say) and one schedules; the others wait, saying so
once, and the first of them to take the lock after the holder is gone schedules from then
on. A beat that loses its lock exits at once (its supervisor starts it again, waiting), so
two never schedule together.

On PostgreSQL the lock is a session advisory lock (``pg_try_advisory_lock``) on a connection
of its own, outside Django's pool: PostgreSQL releases it when the holder's session ends —
the process killed, its machine gone (once the server's TCP keepalive gives the session up)
— and every ``BEAT_LOCK_CHECK_SECONDS`` the holder asks its connection whether it is still
there, and exits if not: a beat cut off from the database stops scheduling within that time,
before a standby could have waited out the server's keepalive. On SQLite (one machine by
definition) it is an exclusive ``flock`` on ``var/beat.lock``, which the kernel releases with
the process.
"""

import fcntl
import logging
import os
import threading
import time
from pathlib import Path

import psycopg
from django.conf import settings

log = logging.getLogger(__name__)
# The schedule's lock key: one per database (two portals on one PostgreSQL have two
# databases, and advisory locks are per database).
LOCK_KEY = 0x7663_6265_6174  # "vcbeat"
LOST_EXIT_CODE = 3


class Held:
    """The lock, held: ``check()`` says whether it still is."""

    def __init__(self, connection=None, file=None):
        self.connection, self.file = connection, file

    def check(self) -> bool:
        if self.connection is None:
            return True  # a flock lasts as long as the process
        try:
            self.connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True


def _connect():
    db = settings.DATABASES["default"]
    return psycopg.connect(
        dbname=db["NAME"],
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        host=db["HOST"] or None,
        port=db["PORT"] or None,
        autocommit=True,
        application_name="vc-portal beat lock",
        connect_timeout=10,
        # A dead peer noticed in seconds, not in the kernel's two hours.
        keepalives=1,
        keepalives_idle=5,
        keepalives_interval=2,
        keepalives_count=3,
    )


def on_postgresql() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def try_lock(held_by: dict, postgres: bool) -> Held | None:
    """The lock if it is free now (a failed connection counts as not free: tried again);
    ``held_by`` keeps the connection or file between tries."""
    if postgres:
        try:
            connection = held_by.get("connection") or _connect()
        except psycopg.Error as error:
            log.warning("beat lock: database unreachable (%s); trying again", error)
            return None
        held_by["connection"] = connection
        try:
            (taken,) = connection.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY]).fetchone()
        except psycopg.Error:
            held_by.pop("connection").close()
            return None
        return Held(connection=connection) if taken else None
    path = Path(settings.VAR_DIR) / "beat.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    file = held_by.get("file") or open(path, "a")  # held for the process's life
    held_by["file"] = file
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None
    return Held(file=file)


def acquire(poll: float | None = None) -> Held:
    """Wait for the schedule's lock, then keep watching it: a lost lock ends the process."""
    poll = poll or settings.BEAT_LOCK_CHECK_SECONDS
    held_by: dict = {}
    said, postgres = False, on_postgresql()
    while (held := try_lock(held_by, postgres)) is None:
        if not said:
            log.info("beat: another beat holds the schedule; this one waits (pid %s)", os.getpid())
            said = True
        time.sleep(poll)
    log.info("beat: this beat schedules (pid %s)", os.getpid())
    threading.Thread(target=_watch, args=(held, poll), name="beat-lock", daemon=True).start()
    return held


def _watch(held: Held, every: float) -> None:
    while True:
        time.sleep(every)
        if not held.check():
            log.error("beat: the schedule's lock is lost (database gone); this beat stops")
            logging.shutdown()
            os._exit(LOST_EXIT_CODE)
