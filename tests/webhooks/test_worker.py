"""Through a real worker on Redis: a receiver that hangs never delays a cluster's walk. The
lifecycle's worker takes the default queue, as in production; the deliveries go to the
``webhooks`` queue, and while one of them is held by a receiver that never answers (sent by a
thread standing for the webhooks' worker), the cluster walks to 실행중 all the same."""

import threading

import pytest
import redis
from django.db import connection

from clusters import services
from clusters.models import ClusterStatus
from portal.webhooks import delivery
from portal.webhooks import services as webhooks
from portal.webhooks.models import EventType, WebhookAttempt, WebhookDelivery
from tests.faults.harness import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_hanging_receiver_does_not_delay_the_clusters_walk(
    world, receiver, redis_server, redis_worker, settings
):
    settings.WEBHOOK_READ_TIMEOUT_SECONDS = 120  # held far longer than the walk takes
    receiver.hanging = True
    webhooks.create_webhook(
        actor=world.admin, project=world.demo, name="status", url=receiver.url,
        events=[EventType.CLUSTER_STATUS_CHANGED],
    )  # fmt: skip
    world.capacity(10)
    cluster = world.cluster()
    world.members(cluster, 2)
    status = lambda: type(cluster).objects.get(pk=cluster.pk).status  # noqa: E731
    services.start_cluster(cluster.pk, actor=world.admin)
    first = WebhookDelivery.objects.get()  # 미할당 → 준비중, written with the start

    def webhooks_worker():
        try:
            delivery.deliver(first.pk)
        finally:
            connection.close()

    sender = threading.Thread(target=webhooks_worker)
    sender.start()
    try:
        wait_until(lambda: len(receiver.requests) == 1, 60, 0.05, "the receiver holding it")
        wait_until(lambda: status() == ClusterStatus.RUNNING, 60, 0.05, "실행중")
        # The walk ended while the first delivery was still waiting for its answer; each
        # change's delivery is written and its message waits on the webhooks' queue (the
        # first one's too: a webhooks worker taking it finds it claimed and sends nothing).
        assert not WebhookAttempt.objects.exists()
        assert WebhookDelivery.objects.filter(status="PENDING").count() == 4
        assert redis.Redis.from_url(redis_server.url).llen("webhooks") == 4
        assert delivery.deliver(first.pk) is None
    finally:
        receiver.released.set()  # the held request ends without an answer
        sender.join(30)
    attempt = WebhookAttempt.objects.get()
    assert attempt.delivery_id == first.pk and attempt.status_code is None
