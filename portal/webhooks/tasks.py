"""The webhooks' tasks, on a queue of their own (``WEBHOOK_QUEUE``, routed in settings): a
receiver that hangs holds a webhooks worker for the read time-out, never a worker of the
clusters' lifecycle."""

from celery import shared_task

from portal.foundation.broker import publish
from portal.webhooks import delivery


@shared_task(acks_late=True, reject_on_worker_lost=True)
def deliver(delivery_id: int) -> None:
    """One attempt of a delivery; a duplicate or late message finds it claimed or settled."""
    delivery.deliver(delivery_id)


@shared_task
def deliver_due() -> None:
    """The beat's sweep: each delivery whose next attempt is due (a retry, or a first attempt
    whose message the broker never took) gets a task of its own."""
    for delivery_id in delivery.due():
        publish(deliver, delivery_id)
