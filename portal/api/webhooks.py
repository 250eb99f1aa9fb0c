"""webhooks: a project's webhooks — list, read, create (the secret in the 201 only), delete,
send a test event, read the delivery log.

Reads go through ``restrict()`` / ``readable()`` (another project's webhook is a 404); a change
is one call of ``portal.webhooks.services``, audited there. A webhook is data of the project:
creating one answers 201, deleting one 204, a test send 202 with its delivery (sent by the
webhooks' worker, not in this request).
"""

from django.http import HttpResponse
from ninja import Query, Router, Status

from portal.api import pagination
from portal.api.common import actor, api_headers, path_id, project
from portal.api.inputs import WebhookCreateIn
from portal.api.schemas import (
    WebhookCreatedOut,
    WebhookDeliveryOut,
    WebhookDeliveryPage,
    WebhookOut,
    WebhookPage,
    read,
)
from portal.foundation.errors.webhooks import WebhookNotFound
from portal.iam.permissions import Perm
from portal.models import readable
from portal.webhooks import services
from portal.webhooks.models import Webhook, WebhookDelivery

router = Router(tags=["webhooks"])
ORDERS = pagination.orders("name", "created_at")
DELIVERY_ORDERS = pagination.orders("created_at")


class WebhookFilters(pagination.PageRequest):
    order_by: str = "name"


class DeliveryFilters(pagination.PageRequest):
    order_by: str = "-created_at"


@router.get("/webhooks", response=WebhookPage, summary="웹훅 목록")
def list_webhooks(request, filters: Query[WebhookFilters]):
    hooks = Webhook.objects.restrict(actor(request), Perm.WEBHOOK_READ)
    return read(WebhookPage, pagination.page(hooks, ORDERS, filters))


@router.get("/webhooks/{int:webhook_id}", response=WebhookOut, summary="웹훅")
def get_webhook(request, webhook_id: int):
    hooks = readable(actor(request), Perm.WEBHOOK_READ, Webhook)
    return read(WebhookOut, hooks.get_or_404(webhook_id))


@router.post("/webhooks", response={201: WebhookCreatedOut}, summary="웹훅 등록")
def create_webhook(request, payload: WebhookCreateIn):
    """Register an http:// or https:// URL in the token's project for ``events`` (left out:
    every type). The answer holds ``secret``, which signs every delivery: it is shown here
    once and never again (docs/webhooks.md says how a receiver checks a signature)."""
    hook = services.create_webhook(
        actor=actor(request),
        project=project(request),
        name=payload.name,
        url=payload.url,
        events=payload.events,
    )
    return Status(201, read(WebhookCreatedOut, hook))


@router.delete("/webhooks/{int:webhook_id}", response={204: None}, summary="웹훅 삭제")
def delete_webhook(request, webhook_id: int):
    """Nothing more is sent to it; its delivery log goes with it."""
    services.delete_webhook(path_id(webhook_id, WebhookNotFound), actor=actor(request))
    done = HttpResponse(status=204)
    del done["Content-Type"]  # no content, of no type
    return api_headers(done)


@router.post(
    "/webhooks/{int:webhook_id}:test", response={202: WebhookDeliveryOut}, summary="테스트 전송"
)
def test_webhook(request, webhook_id: int):
    """A ``webhook.test`` event to this webhook, signed and retried like any other; the
    answer is its delivery as queued (its log: ``GET /webhooks/{id}/deliveries``)."""
    sent = services.send_test(path_id(webhook_id, WebhookNotFound), actor=actor(request))
    return Status(202, read(WebhookDeliveryOut, sent))


@router.get(
    "/webhooks/{int:webhook_id}/deliveries",
    response=WebhookDeliveryPage,
    summary="웹훅 전송 기록",
)
def list_deliveries(request, webhook_id: int, filters: Query[DeliveryFilters]):
    """Newest first, each with its attempts: the receiver's status code, or why none came
    (``timeout``, ``connection``, ``dns``, ``address``, ``tls``), and how long it took."""
    user = actor(request)
    hook = readable(user, Perm.WEBHOOK_READ, Webhook).get_or_404(webhook_id)
    rows = WebhookDelivery.objects.filter(webhook=hook).prefetch_related("attempt_log")
    return read(WebhookDeliveryPage, pagination.page(rows, DELIVERY_ORDERS, filters))
