"""The one door an app sends an event through: ``emit`` writes a delivery (the outbox row)
for each webhook of the project subscribed to the event, in the transaction of the change it
tells of, and queues their sending for after the commit. A change rolled back sends nothing;
a broker that cannot take the message leaves the delivery to the beat's sweep
(``portal.webhooks.tasks.deliver_due``). Nothing here waits for a receiver."""

import json
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.foundation.broker import publish
from portal.webhooks.models import Webhook, WebhookDelivery

DELIVER_TASK = "portal.webhooks.tasks.deliver"


def envelope(event_id: uuid.UUID, event_type: str, at: datetime, project_id: int, data: Any) -> str:
    """The body every delivery sends: the event's id, type, time, project and ``data``,
    as compact UTF-8 JSON."""
    document = {
        "id": str(event_id),
        "type": event_type,
        "created_at": at.isoformat().replace("+00:00", "Z"),
        "project_id": project_id,
        "data": data,
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)


def emit(project_id: int, event_type: str, data: Any) -> list[int]:
    """Tell ``project_id``'s webhooks subscribed to ``event_type`` that it happened:
    one delivery each, one event id for all. Returns the deliveries' ids."""
    hooks = [
        pk
        for pk, events in Webhook.objects.filter(project_id=project_id).values_list("pk", "events")
        if event_type in events
    ]
    return queue(project_id, hooks, event_type, data) if hooks else []


def queue(project_id: int, webhook_ids: list[int], event_type: str, data: Any) -> list[int]:
    """A delivery of one new event to each of ``webhook_ids``, sent after commit."""
    event_id, now = uuid.uuid4(), timezone.now()
    body = envelope(event_id, event_type, now, project_id, data)
    rows = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            project_id=project_id,
            webhook_id=pk,
            event_id=event_id,
            event_type=event_type,
            body=body,
            next_attempt_at=now,
        )
        for pk in webhook_ids
    )
    ids = [row.pk for row in rows]
    transaction.on_commit(lambda: send_all(ids))
    return ids


def send_all(delivery_ids: list[int]) -> None:
    """Queue each delivery's first attempt, a task each: one slow receiver holds up no other."""
    for pk in delivery_ids:
        publish(DELIVER_TASK, pk)


def cluster_ref(cluster: Any) -> dict:
    """How an event names a cluster."""
    return {"id": cluster.pk, "name": cluster.name}
