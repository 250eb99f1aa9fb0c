"""portal's one task: the worker's heartbeat."""

from celery import shared_task


@shared_task(ignore_result=True)
def heartbeat():
    """Queued by beat so an idle worker stamps its heartbeat too (the stamp is
    ``task_postrun``'s, wired in ``portal.celery``)."""
