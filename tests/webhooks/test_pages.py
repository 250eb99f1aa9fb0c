"""The 웹훅 page: created with the secret shown in that answer only, a refused URL said in
place with what was typed kept, 테스트 전송 logged with the receiver's status code; a viewer
sees the webhooks with the buttons disabled and the reason, another project's log is a 404."""

import pytest
from django.urls import reverse
from django.utils import translation

from portal.webhooks.models import Webhook
from portal.webhooks.services import create_webhook

pytestmark = pytest.mark.django_db


def test_created_with_the_secret_shown_once(world, client):
    client.force_login(world.admin)
    data = {
        "name": "alerts",
        "url": "https://hooks.example.com/vc",
        "events": ["validation.finished"],
    }
    response = client.post(reverse("webhooks"), data)
    assert response.status_code == 200
    hook = Webhook.objects.get()
    assert hook.events == ["validation.finished"] and hook.project == world.demo
    page = response.content.decode()
    assert hook.secret in page and "서명 비밀은 지금 한 번만 보여 드립니다" in page
    assert response["Cache-Control"].startswith("max-age=0")  # never cached
    again = client.get(reverse("webhooks")).content.decode()
    assert "alerts" in again and hook.secret not in again
    assert hook.secret not in client.get(reverse("webhook_log", args=[hook.pk])).content.decode()


def test_a_refused_url_is_said_in_place_and_kept(world, client):
    client.force_login(world.admin)
    data = {
        "name": "alerts",
        "url": "ftp://hooks.example.com/",
        "events": ["cluster.status_changed"],
    }
    with translation.override("ko"):
        response = client.post(reverse("webhooks"), data)
    assert response.status_code == 422
    page = response.content.decode()
    assert "http:// 또는 https://만 쓸 수 있습니다(입력한 스킴: ftp)" in page
    assert 'value="ftp://hooks.example.com/"' in page and 'aria-invalid="true"' in page
    assert not Webhook.objects.exists()


def test_test_send_is_logged_with_the_status_code(
    world, client, receiver, django_capture_on_commit_callbacks
):
    receiver.answers = [503]
    hook = create_webhook(actor=world.admin, project=world.demo, name="alerts", url=receiver.url)
    client.force_login(world.users["operator"])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("webhook_test", args=[hook.pk]))
    assert response.status_code == 302 and response["Location"] == reverse(
        "webhook_log", args=[hook.pk]
    )
    page = client.get(reverse("webhook_log", args=[hook.pk])).content.decode()
    assert "webhook.test" in page and "<strong>503</strong>" in page and "전송 대기" in page


def test_a_viewer_sees_the_buttons_disabled_with_the_reason(world, client):
    hook = create_webhook(
        actor=world.admin, project=world.demo, name="alerts", url="https://h.example.com/"
    )
    client.force_login(world.users["viewer"])
    page = client.get(reverse("webhooks")).content.decode()
    assert "alerts" in page and 'name="url"' not in page
    assert "Resource.Webhook.CREATE 권한이 필요합니다." in page
    assert "Resource.Webhook.UPDATE 권한이 필요합니다." in page
    assert "Resource.Webhook.DELETE 권한이 필요합니다." in page
    assert 'disabled aria-describedby="webhook-test-reason"' in page
    log = client.get(reverse("webhook_log", args=[hook.pk])).content.decode()
    assert 'id="webhook-test" disabled' in log


def test_another_projects_log_is_not_found(world, client):
    hook = create_webhook(
        actor=world.admin, project=world.demo, name="alerts", url="https://h.example.com/"
    )
    client.force_login(world.users["other"])
    assert client.get(reverse("webhook_log", args=[hook.pk])).status_code == 404
    assert client.post(reverse("webhook_test", args=[hook.pk])).status_code == 404
    assert "alerts" not in client.get(reverse("webhooks")).content.decode()
