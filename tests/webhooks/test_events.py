"""What the clusters send: each status change of a cluster, a 검증's verdict, a 교체's start
and end — once per event and webhook subscribed, nothing to a webhook not subscribed, nothing
for a change refused."""

import json

import pytest

from clusters import operations, services
from clusters.models import ClusterStatus
from portal.foundation import errors
from portal.webhooks import services as webhooks
from portal.webhooks.models import EventType, WebhookDelivery
from vms.models import BillingType, VirtualMachine, VmStatus


def events(receiver):
    return [json.loads(body) for body in receiver.bodies()]


@pytest.fixture
def status_hook(world, receiver):
    return webhooks.create_webhook(
        actor=world.admin,
        project=world.demo,
        name="status",
        url=receiver.url,
        events=[EventType.CLUSTER_STATUS_CHANGED],
    )


def test_a_cluster_start_sends_each_status_change_once(
    world, receiver, status_hook, django_capture_on_commit_callbacks
):
    world.capacity(10)
    cluster = world.cluster()
    world.members(cluster, 2)
    webhooks.create_webhook(
        actor=world.admin, project=world.demo, name="verdicts", url=receiver.url + "&v",
        events=[EventType.VALIDATION_FINISHED],
    )  # fmt: skip
    theirs = world.cluster("theirs", project=world.other)
    with django_capture_on_commit_callbacks(execute=True):
        services.start_cluster(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING
    sent = events(receiver)
    assert [(e["data"]["previous_status"], e["data"]["status"]) for e in sent] == [
        ("UNALLOCATED", "PROVISIONING"),
        ("PROVISIONING", "ALLOCATED"),
        ("ALLOCATED", "WAITING"),
        ("WAITING", "RUNNING"),
    ]
    assert {e["type"] for e in sent} == {"cluster.status_changed"}
    assert {e["data"]["cluster"]["id"] for e in sent} == {cluster.pk} != {theirs.pk}
    assert len({e["id"] for e in sent}) == 4  # one event each, each delivered once
    assert WebhookDelivery.objects.filter(webhook=status_hook).count() == 4
    assert {r.headers["X-VC-Event-Id"] for r in receiver.requests} == {e["id"] for e in sent}
    # The verdicts' webhook heard nothing; a refused change sends nothing.
    with pytest.raises(errors.InvalidTransition):
        services.start_cluster(cluster.pk, actor=world.admin)
    assert WebhookDelivery.objects.count() == 4


def test_another_projects_changes_are_not_sent(world, receiver, status_hook):
    cluster = world.cluster("theirs", project=world.other)
    world.members(cluster, 2)
    services.start_cluster(cluster.pk, actor=world.users["other"])
    assert not WebhookDelivery.objects.exists()


def test_a_validation_sends_its_verdict(world, receiver, django_capture_on_commit_callbacks):
    from tests.validation.test_run import NODES, running_cluster

    cluster = running_cluster(world, NODES)
    webhooks.create_webhook(
        actor=world.admin, project=world.demo, name="verdicts", url=receiver.url,
        events=[EventType.VALIDATION_FINISHED],
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.start_validation(cluster.pk, actor=world.admin, level=2)
    (event,) = events(receiver)
    data = event["data"]
    assert event["type"] == "validation.finished" and data["operation_id"] == operation.pk
    assert data["cluster"] == {"id": cluster.pk, "name": "train"}
    assert data["verdict"] == "BAD" and data["level"] == 2
    assert data["counts"] == {"OK": 3, "WARN": 0, "BAD": 1, "NO_ANSWER": 0}
    bad = [m for m in data["members"] if m["verdict"] == "BAD"]
    assert [m["name"] for m in bad] == ["gpu-node-03"] and bad[0]["reasons"]


def test_a_replacement_sends_its_start_and_its_success(
    world, receiver, django_capture_on_commit_callbacks
):
    world.capacity(10)
    cluster = world.cluster()
    a, b = (world.vm(name) for name in "ab")
    for vm in (a, b):
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    VirtualMachine.objects.filter(pk__in=[a.pk, b.pk]).update(status=VmStatus.RUNNING)
    type(cluster).objects.filter(pk=cluster.pk).update(status=ClusterStatus.RUNNING)
    spare = world.vm("spare", billing_type=BillingType.RESERVED)
    webhooks.create_webhook(
        actor=world.admin, project=world.demo, name="swaps", url=receiver.url,
        events=[EventType.REPLACEMENT_STARTED, EventType.REPLACEMENT_SUCCEEDED,
                EventType.REPLACEMENT_FAILED],
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    started, ended = events(receiver)
    assert started["type"] == "replacement.started" and ended["type"] == "replacement.succeeded"
    for event in (started, ended):
        assert event["data"]["operation_id"] == operation.pk
        assert event["data"]["member"]["name"] == "a" and event["data"]["spare"]["name"] == "spare"
    assert started["data"]["member"]["node_rank"] == 0
    assert ended["data"]["spare"]["node_rank"] == 0 and ended["data"]["error_code"] is None


def test_a_swap_refused_at_its_step_sends_the_replacements_failure(
    world, receiver, django_capture_on_commit_callbacks, monkeypatch
):
    cluster = world.cluster()
    a, b = (world.vm(name) for name in "ab")
    for vm in (a, b):
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    spare = world.vm("spare")
    webhooks.create_webhook(
        actor=world.admin, project=world.demo, name="swaps", url=receiver.url,
        events=[EventType.REPLACEMENT_STARTED, EventType.REPLACEMENT_FAILED],
    )  # fmt: skip
    # The swap's own rule refuses on the locked rows (as a concurrent change would).
    monkeypatch.setattr(services, "detach_refusal", lambda *args: errors.ClusterChanging())
    with django_capture_on_commit_callbacks(execute=True):
        operation = operations.replace_member(cluster.pk, a.pk, spare.pk, actor=world.admin)
    started, failed = events(receiver)
    assert (started["type"], failed["type"]) == ("replacement.started", "replacement.failed")
    assert failed["data"]["operation_id"] == operation.pk
    assert failed["data"]["error_code"] == "cluster_changing"


def test_a_replacement_refused_whole_sends_nothing(world, receiver):
    cluster = world.cluster()
    a, b = (world.vm(name) for name in "ab")
    for vm in (a, b):
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    webhooks.create_webhook(actor=world.admin, project=world.demo, name="all", url=receiver.url)
    spot = world.vm("spot", billing_type=BillingType.SPOT)
    with pytest.raises(errors.SpotOrDrVm):
        operations.replace_member(cluster.pk, a.pk, spot.pk, actor=world.admin)
    assert not WebhookDelivery.objects.exists()


def test_a_members_health_change_is_sent_with_its_evidence(
    world, receiver, django_capture_on_commit_callbacks
):
    """A silent agent makes its member 의심, and its call 정상 again: one event each."""
    from vms import health

    webhooks.create_webhook(
        actor=world.admin, project=world.demo, name="health", url=receiver.url,
        events=[EventType.MEMBER_HEALTH_CHANGED],
    )  # fmt: skip
    cluster = world.cluster("train", status=ClusterStatus.RUNNING)
    (vm,) = world.members(cluster, 1, status=VmStatus.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        health.apply_health(vm.pk, health.SILENT, {"seconds": 45})
        health.apply_health(vm.pk, health.SILENT, {"seconds": 45})  # the same: nothing sent
        health.apply_health(vm.pk, health.BACK)
    sent = events(receiver)
    assert [e["type"] for e in sent] == ["member.health_changed"] * 2
    first, second = (e["data"] for e in sent)
    assert first["vm"] == {"id": vm.pk, "name": vm.name, "node_rank": 0}
    assert first["cluster_id"] == cluster.pk
    assert (first["previous_health"], first["health"]) == ("OK", "SUSPECT")
    assert first["evidence"] == {"code": "health_agent_silent", "params": {"seconds": 45}}
    assert (second["previous_health"], second["health"]) == ("SUSPECT", "OK")
