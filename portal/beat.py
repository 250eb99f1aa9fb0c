"""Beat's scheduler: it runs the reconciler itself instead of queueing it.

The reconciler repairs what a dead or wedged worker left (SPEC §4). Queued as a task, it
needs the very worker pool whose failure it is meant to repair: after both prefork children
of a worker were SIGKILLed on the filesystem broker, the pool never consumed again and the
reconcile messages piled up behind the stuck transition. Run here, it needs only beat and
the database, and beat is restarted by ``rundemo``'s supervisor (or systemd) if it dies.

A repair drives the backend through every remaining step, so one run can take seconds: it
runs in a thread of its own, so beat keeps sending the other entries (the worker heartbeat
among them) on time; a tick that finds the previous run still going is skipped.
"""

import logging
import threading

from celery.beat import PersistentScheduler
from django.db import close_old_connections, connections

log = logging.getLogger(__name__)

# Entries of CELERY_BEAT_SCHEDULE that run in the beat process instead of on a worker.
IN_BEAT = frozenset({"clusters.tasks.reconcile"})


class Scheduler(PersistentScheduler):
    def __init__(self, *args, **kwargs):
        self._running: dict[str, threading.Thread] = {}
        super().__init__(*args, **kwargs)

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task not in IN_BEAT:
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        entry = self.reserve(entry) if advance else entry
        running = self._running.get(entry.task)
        if running is not None and running.is_alive():
            log.info("%s still running: this tick is skipped", entry.task)
            return None
        thread = threading.Thread(
            target=self._run_here, args=(entry,), name=f"beat:{entry.name}", daemon=True
        )
        self._running[entry.task] = thread
        thread.start()
        return None

    def _run_here(self, entry) -> None:
        """Apply the task in this thread; its failure is logged with the traceback."""
        close_old_connections()
        try:
            result = self.app.tasks[entry.task].apply(entry.args, entry.kwargs)
            if result.failed():
                log.error("%s failed in beat:\n%s", entry.task, result.traceback)
        finally:
            connections.close_all()  # this thread's connections: it ends here
