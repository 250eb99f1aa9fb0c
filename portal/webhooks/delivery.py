"""Sending a delivery: claim it, POST it with short time-outs, log the attempt, then settle
it (a 2xx: 성공) or set its next attempt by exponential backoff, until the last allowed
attempt fails (실패).

This runs in the webhooks' own worker queue (``WEBHOOK_QUEUE``), never in a request or an
operation's task: a receiver that hangs costs that worker the read time-out, and nothing else
waits for it. A redirect is not followed (it is logged as its 3xx); the receiver's address is
checked before each connection (``address_refusal``).
"""

import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.webhooks import signing
from portal.webhooks.models import WebhookAttempt, WebhookDelivery

USER_AGENT = "vc-portal-webhooks/1"
Status = WebhookDelivery.Status


@dataclass(frozen=True)
class Answer:
    status_code: int | None
    error: str  # blank when a status code came
    duration_ms: int

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def blocked(address: str) -> bool:
    """Whether the portal refuses to send to ``address``: link-local (a cloud's metadata
    service), multicast and unspecified always; private and loopback ones when
    ``WEBHOOK_REFUSE_PRIVATE_ADDRESSES`` is on (production's default)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    # An IPv4 address written as IPv6 (::ffff:169.254.169.254) is judged as the IPv4 one.
    mapped = getattr(ip, "ipv4_mapped", None)
    ip = mapped if mapped is not None else ip
    if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return True
    private = ip.is_private or ip.is_loopback
    return private and settings.WEBHOOK_REFUSE_PRIVATE_ADDRESSES


def backoff(attempts: int) -> timedelta:
    """How long after its ``attempts``-th failed attempt a delivery is tried again: the base,
    doubled each time, at most an hour."""
    seconds = settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempts - 1)
    return timedelta(seconds=min(seconds, 3600))


def _addresses(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def post(url: str, secret: str, body: bytes, headers: dict[str, str], now: float) -> Answer:
    """POST ``body`` to ``url``, signed at ``now``: the status code, or why none came."""
    started = time.monotonic()

    def answer(status_code: int | None, error: str = "") -> Answer:
        return Answer(status_code, error, int((time.monotonic() - started) * 1000))

    parts = urlsplit(url)
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    host = parts.hostname or ""
    try:
        if any(blocked(address) for address in _addresses(host, port)):
            return answer(None, "address")
    except (OSError, ValueError):
        return answer(None, "dns")
    timestamp = int(now)
    sent = {
        **headers,
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.TIMESTAMP_HEADER: str(timestamp),
        signing.SIGNATURE_HEADER: signing.signature(secret, timestamp, body),
    }
    connect = settings.WEBHOOK_CONNECT_TIMEOUT_SECONDS
    connection_type = http.client.HTTPSConnection if secure else http.client.HTTPConnection
    connection = connection_type(host, port, timeout=connect)
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    try:
        connection.connect()
        assert connection.sock is not None  # noqa: S101 - connect() made it
        connection.sock.settimeout(settings.WEBHOOK_READ_TIMEOUT_SECONDS)
        connection.request("POST", path, body=body, headers=sent)
        status = connection.getresponse().status
    except TimeoutError:
        return answer(None, "timeout")
    except ssl.SSLError:
        return answer(None, "tls")
    except (OSError, http.client.HTTPException):
        return answer(None, "connection")
    finally:
        connection.close()
    return answer(status)


def claim(delivery_id: int, now: datetime) -> WebhookDelivery | None:
    """The delivery, if it is due and no one else is sending it: its attempt counted and its
    next one set past this one's longest wait, so the sweep leaves it alone meanwhile."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .select_related("webhook")
            .filter(pk=delivery_id, status=Status.PENDING, next_attempt_at__lte=now)
            .first()
        )
        if delivery is None:
            return None
        delivery.attempts += 1
        longest = settings.WEBHOOK_CONNECT_TIMEOUT_SECONDS + settings.WEBHOOK_READ_TIMEOUT_SECONDS
        delivery.next_attempt_at = now + timedelta(seconds=longest + 60)
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    return delivery


def settle(delivery: WebhookDelivery, answer: Answer, at: datetime) -> None:
    """Log the attempt; 성공 on a 2xx, 실패 after the last allowed attempt, else the next
    attempt by ``backoff``. A delivery gone meanwhile (its webhook deleted) is left gone."""
    with transaction.atomic():
        row = WebhookDelivery.objects.select_for_update().filter(pk=delivery.pk).first()
        if row is None:
            return
        WebhookAttempt.objects.create(
            delivery=row,
            number=delivery.attempts,
            at=at,
            status_code=answer.status_code,
            error=answer.error,
            duration_ms=answer.duration_ms,
        )
        if answer.succeeded:
            row.status, row.next_attempt_at = Status.SUCCEEDED, None
        elif row.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            row.status, row.next_attempt_at = Status.FAILED, None
        else:
            row.next_attempt_at = at + backoff(row.attempts)
        row.save(update_fields=["status", "next_attempt_at"])


def deliver(delivery_id: int, now: datetime | None = None) -> Answer | None:
    """One attempt of a due delivery (None: not due, settled, or being sent elsewhere)."""
    now = now or timezone.now()
    delivery = claim(delivery_id, now)
    if delivery is None:
        return None
    headers = {signing.ID_HEADER: str(delivery.event_id), signing.TYPE_HEADER: delivery.event_type}
    webhook = delivery.webhook
    answer = post(webhook.url, webhook.secret, delivery.body.encode(), headers, time.time())
    settle(delivery, answer, timezone.now())
    return answer


def due(now: datetime | None = None, limit: int = 500) -> list[int]:
    """The deliveries whose next attempt is due, oldest first."""
    rows = WebhookDelivery.objects.filter(
        status=Status.PENDING, next_attempt_at__lte=now or timezone.now()
    )
    return list(rows.order_by("next_attempt_at").values_list("pk", flat=True)[:limit])
