"""Beat's scheduler: it runs the reconciler itself instead of queueing it.

The reconciler repairs what a dead or wedged worker left (SPEC §4). Queued as a task, it
needs the very worker pool whose failure it is meant to repair: after both prefork children
of a worker were SIGKILLed on the filesystem broker, the pool never consumed again and the
reconcile messages piled up behind the stuck transition. Run here, it needs only beat and
the database, and beat is restarted by ``rundemo``'s supervisor (or systemd) if it dies.
"""

from celery.beat import PersistentScheduler
from django.db import close_old_connections

# Entries of CELERY_BEAT_SCHEDULE that run in the beat process instead of on a worker.
IN_BEAT = frozenset({"clusters.tasks.reconcile"})


class Scheduler(PersistentScheduler):
    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task not in IN_BEAT:
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        entry = self.reserve(entry) if advance else entry
        # Beat is a long-lived process outside Celery's worker fixup: drop connections that
        # died or aged out before and after, as Django does around a request.
        close_old_connections()
        try:
            # throw=True: a failure reaches beat's apply_entry, which logs it and carries on.
            return self.app.tasks[entry.task].apply(entry.args, entry.kwargs, throw=True)
        finally:
            close_old_connections()
