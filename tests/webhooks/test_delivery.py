"""Sending a delivery to a real receiver: signed so the receiver can check it, retried after
a 5xx by the backoff until it succeeds or its attempts run out, every attempt logged; a
receiver that hangs is cut off by the read time-out, in the webhooks' own queue."""

import hmac
import json
import time
from datetime import timedelta

import pytest

from portal.celery import app
from portal.webhooks import delivery, services, signing
from portal.webhooks.models import TEST_EVENT, WebhookAttempt, WebhookDelivery

Status = WebhookDelivery.Status


def attempts(row):
    return list(
        WebhookAttempt.objects.filter(delivery=row)
        .order_by("number")
        .values_list("number", "status_code", "error")
    )


def test_the_receiver_can_verify_the_signature(
    world, receiver, hook, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        sent = services.send_test(hook.pk, actor=world.admin)
    (request,) = receiver.requests
    headers, body = request.headers, request.body
    timestamp, header = headers[signing.TIMESTAMP_HEADER], headers[signing.SIGNATURE_HEADER]
    assert signing.verify(hook.secret, timestamp, body, header, now=time.time())
    signed = f"{timestamp}.".encode() + body
    assert header == "v1=" + hmac.new(hook.secret.encode(), signed, "sha256").hexdigest()
    # Another body, another secret, an old timestamp: refused.
    assert not signing.verify(hook.secret, timestamp, body + b" ", header, now=time.time())
    assert not signing.verify("whsec_other", timestamp, body, header, now=time.time())
    assert not signing.verify(hook.secret, timestamp, body, header, now=int(timestamp) + 301)
    event = json.loads(body)
    assert event["type"] == TEST_EVENT and event["id"] == str(sent.event_id)
    assert event["project_id"] == world.demo.pk and event["data"]["webhook"]["name"] == "alerts"
    assert headers[signing.ID_HEADER] == str(sent.event_id)
    assert headers[signing.TYPE_HEADER] == TEST_EVENT
    assert headers["Content-Type"] == "application/json"
    sent.refresh_from_db()
    assert sent.status == Status.SUCCEEDED and sent.next_attempt_at is None
    assert attempts(sent) == [(1, 200, "")]


def test_a_500_is_retried_by_the_backoff_then_succeeds(
    world, receiver, hook, settings, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 30
    receiver.answers = [500]
    with django_capture_on_commit_callbacks(execute=True):
        sent = services.send_test(hook.pk, actor=world.admin)
    sent.refresh_from_db()
    first = WebhookAttempt.objects.get(delivery=sent)
    assert sent.status == Status.PENDING and sent.attempts == 1
    assert sent.next_attempt_at == first.at + timedelta(seconds=30)
    # Not due yet: nothing is sent, by the task or the beat's sweep.
    early = sent.next_attempt_at - timedelta(seconds=1)
    assert delivery.deliver(sent.pk, now=early) is None
    assert delivery.due(early) == [] and len(receiver.requests) == 1
    assert delivery.due(sent.next_attempt_at) == [sent.pk]
    answer = delivery.deliver(sent.pk, now=sent.next_attempt_at)
    assert answer is not None and answer.status_code == 200
    sent.refresh_from_db()
    assert sent.status == Status.SUCCEEDED and attempts(sent) == [(1, 500, ""), (2, 200, "")]
    # The same event and bytes each time, each signed at its own attempt.
    first_request, second_request = receiver.requests
    assert first_request.body == second_request.body
    assert first_request.headers[signing.ID_HEADER] == second_request.headers[signing.ID_HEADER]
    for request in receiver.requests:
        headers = request.headers
        assert signing.verify(
            hook.secret,
            headers[signing.TIMESTAMP_HEADER],
            request.body,
            headers[signing.SIGNATURE_HEADER],
            now=time.time(),
        )
    # Settled: a late or duplicate message sends nothing more.
    assert delivery.deliver(sent.pk, now=sent.created_at + timedelta(days=1)) is None
    assert len(receiver.requests) == 2


def test_the_waits_double_and_the_last_attempt_fails_the_delivery(
    world, receiver, hook, settings, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 10
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    receiver.answers = [500, 503, 302]
    with django_capture_on_commit_callbacks(execute=True):
        sent = services.send_test(hook.pk, actor=world.admin)
    waits = []
    for _ in range(2):
        sent.refresh_from_db()
        last = WebhookAttempt.objects.filter(delivery=sent).first()
        waits.append((sent.next_attempt_at - last.at).total_seconds())
        delivery.deliver(sent.pk, now=sent.next_attempt_at)
    sent.refresh_from_db()
    assert waits == [10, 20]
    assert sent.status == Status.FAILED and sent.next_attempt_at is None
    assert attempts(sent) == [(1, 500, ""), (2, 503, ""), (3, 302, "")]  # a redirect: not followed
    assert delivery.due(sent.created_at + timedelta(days=1)) == []


def test_a_hanging_receiver_is_cut_off_and_logged(
    world, receiver, hook, settings, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_READ_TIMEOUT_SECONDS = 0.5
    receiver.hanging = True
    with django_capture_on_commit_callbacks(execute=False) as queued:
        sent = services.send_test(hook.pk, actor=world.admin)
    # The change committed with its delivery written and its sending queued: nothing waited.
    assert len(queued) == 1 and receiver.requests == []
    sent.refresh_from_db()
    assert sent.status == Status.PENDING and sent.attempts == 0
    answer = delivery.deliver(sent.pk)
    assert answer is not None and (answer.status_code, answer.error) == (None, "timeout")
    assert len(receiver.requests) == 1  # it got the request, and never answered
    sent.refresh_from_db()
    assert sent.status == Status.PENDING and attempts(sent) == [(1, None, "timeout")]
    assert sent.next_attempt_at > WebhookAttempt.objects.get(delivery=sent).at


def test_deliveries_run_on_the_webhooks_own_queue(settings):
    for task in ("portal.webhooks.tasks.deliver", "portal.webhooks.tasks.deliver_due"):
        route = app.amqp.router.route({}, task)
        assert route["queue"].name == settings.WEBHOOK_QUEUE != "celery"
    assert app.amqp.router.route({}, "clusters.tasks.advance_cluster")["queue"].name == "celery"


def test_a_receiver_that_is_not_there_is_a_connection_error(world, receiver, hook):
    hook.url = "http://127.0.0.1:9/nothing-listens"  # the discard port: refused
    hook.save()
    sent = WebhookDelivery.objects.get(pk=services.send_test(hook.pk, actor=world.admin).pk)
    answer = delivery.deliver(sent.pk)
    assert answer is not None and answer.error == "connection"


@pytest.mark.parametrize(
    "address",
    ["169.254.169.254", "::ffff:169.254.169.254", "fe80::1%eth0", "0.0.0.0"],  # noqa: S104
)
def test_link_local_and_unspecified_receivers_are_never_sent_to(address, settings):
    settings.WEBHOOK_REFUSE_PRIVATE_ADDRESSES = False
    assert delivery.blocked(address)


def test_private_receivers_are_refused_when_the_setting_says_so(settings):
    settings.WEBHOOK_REFUSE_PRIVATE_ADDRESSES = True
    assert delivery.blocked("127.0.0.1") and delivery.blocked("10.1.2.3")
    assert delivery.blocked("::ffff:127.0.0.1") and delivery.blocked("::1")
    assert not delivery.blocked("8.8.8.8")
    settings.WEBHOOK_REFUSE_PRIVATE_ADDRESSES = False
    assert not delivery.blocked("127.0.0.1")
