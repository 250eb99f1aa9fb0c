"""The webhook rules: who may create, test and delete one; which URLs and events are taken
(refused ones save nothing, with the message saying why); the secret made by the server,
kept out of the audit trail."""

import pytest
from django.utils import translation

from portal.foundation.errors import NameInvalid, PermissionRequired
from portal.foundation.errors import webhooks as refusals
from portal.models import AuditEvent
from portal.webhooks import services
from portal.webhooks.models import EventType, Webhook, WebhookDelivery

URL = "https://hooks.example.com/vc"


def create(world, user="admin", **kw):
    fields = {"name": "alerts", "url": URL} | kw
    return services.create_webhook(actor=world.users[user], project=world.demo, **fields)


def test_created_with_a_secret_of_its_own_and_every_event_by_default(world):
    first, second = create(world), create(world, name="second")
    assert first.secret.startswith("whsec_") and len(first.secret) > 40
    assert first.secret != second.secret
    assert first.events == EventType.values
    assert "member.health_changed" in first.events  # subscribable before it is emitted
    event = AuditEvent.objects.get(action="webhook.create", target_id=first.pk)
    assert event.outcome == "SUCCEEDED" and event.message == URL
    assert first.secret not in str(AuditEvent.objects.values_list())


@pytest.mark.parametrize(
    ("url", "error", "words"),
    [
        ("ftp://hooks.example.com/x", refusals.WebhookUrlScheme, "ftp"),
        ("file:///etc/passwd", refusals.WebhookUrlScheme, "file"),
        ("javascript:alert(1)", refusals.WebhookUrlScheme, "javascript"),
        ("hooks.example.com/vc", refusals.WebhookUrlRefused, "http://"),
        ("https://", refusals.WebhookUrlRefused, "http://"),
        ("https://user:pw@hooks.example.com/", refusals.WebhookUrlCredentials, "비밀번호"),
        ("https://hooks.example.com/a b", refusals.WebhookUrlRefused, "http://"),
        ("https://hooks.example.com:99999/", refusals.WebhookUrlRefused, "http://"),
        ("https://hooks.example.com/" + "a" * 2000, refusals.WebhookUrlTooLong, "2000"),
        ("http://169.254.169.254/latest/meta-data", refusals.WebhookUrlAddress, "169.254"),
        ("", refusals.WebhookUrlRefused, "http://"),
    ],
)
def test_urls_refused_save_nothing_and_say_why(world, url, error, words):
    with translation.override("ko"), pytest.raises(error) as refused:
        create(world, url=url)
    assert words in refused.value.message and refused.value.field == "url"
    assert not Webhook.objects.exists()
    assert AuditEvent.objects.get(action="webhook.create").outcome == "REFUSED"


def test_private_addresses_are_refused_where_the_setting_says(world, settings):
    settings.WEBHOOK_REFUSE_PRIVATE_ADDRESSES = True
    for url in ("http://127.0.0.1:8080/", "http://localhost/", "http://10.0.0.5/", "http://[::1]/"):
        with pytest.raises(refusals.WebhookUrlAddress):
            create(world, url=url)
    settings.WEBHOOK_REFUSE_PRIVATE_ADDRESSES = False
    assert create(world, url="http://127.0.0.1:8080/").pk


def test_in_english_the_refusal_is_english(world):
    with translation.override("en"):
        with pytest.raises(refusals.WebhookUrlScheme) as refused:
            create(world, url="gopher://x")
        message = refused.value.message
    assert message == "A webhook URL must use http:// or https:// (the scheme entered: gopher)."


def test_events_must_be_known_and_at_least_one(world):
    with pytest.raises(refusals.WebhookEventsRequired):
        create(world, events=[])
    with pytest.raises(refusals.WebhookEventUnknown):
        create(world, events=["cluster.status_changed", "webhook.test"])
    with pytest.raises(refusals.WebhookEventsRequired):
        create(world, events="cluster.status_changed")
    hook = create(world, events=["validation.finished", "cluster.status_changed"])
    assert hook.events == ["validation.finished", "cluster.status_changed"]  # EventType's order


def test_names_follow_the_name_rule_and_are_unique_in_the_project(world):
    create(world)
    with pytest.raises(refusals.WebhookNameTaken):
        create(world)
    with pytest.raises(NameInvalid):
        create(world, name="no spaces")
    other = services.create_webhook(
        actor=world.users["other"], project=world.other, name="alerts", url=URL
    )
    assert other.project == world.other


def test_a_project_holds_a_bounded_number(world):
    for n in range(refusals.MAX_WEBHOOKS_PER_PROJECT):
        create(world, name=f"hook-{n}")
    with pytest.raises(refusals.WebhookLimit):
        create(world, name="one-more")


@pytest.mark.parametrize("user", ["viewer", "operator"])
def test_viewers_and_operators_cannot_create_or_delete(world, user):
    with pytest.raises(PermissionRequired):
        create(world, user=user)
    hook = create(world)
    with pytest.raises(PermissionRequired):
        services.delete_webhook(hook.pk, actor=world.users[user])
    assert Webhook.objects.filter(pk=hook.pk).exists()


def test_a_viewer_cannot_send_a_test_an_operator_can(world):
    hook = create(world)
    with pytest.raises(PermissionRequired):
        services.send_test(hook.pk, actor=world.users["viewer"])
    assert not WebhookDelivery.objects.exists()
    sent = services.send_test(hook.pk, actor=world.users["operator"])
    assert sent.event_type == "webhook.test" and sent.status == "PENDING"
    assert AuditEvent.objects.filter(action="webhook.test", outcome="SUCCEEDED").count() == 1


@pytest.mark.parametrize("user", ["other", "norole"])
def test_another_projects_webhook_is_not_found(world, user):
    hook = create(world)
    for action in (services.delete_webhook, services.send_test):
        with pytest.raises(refusals.WebhookNotFound):
            action(hook.pk, actor=world.users[user])
    assert Webhook.objects.filter(pk=hook.pk).exists()


def test_deleting_takes_its_deliveries(world):
    hook = create(world)
    services.send_test(hook.pk, actor=world.admin)
    services.delete_webhook(hook.pk, actor=world.admin)
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()
    assert AuditEvent.objects.filter(action="webhook.delete", outcome="SUCCEEDED").exists()
