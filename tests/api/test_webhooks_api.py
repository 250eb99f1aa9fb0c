"""``/api/v1/webhooks`` (docs/rules.md#webhooks): the secret in the create's answer only, a
refused URL as problem+json with its code and nothing saved, a test send answered 202 and
logged with the receiver's status code, another project's webhook a 404."""

import pytest

from portal.webhooks.models import EventType, Webhook

pytestmark = pytest.mark.django_db


def test_create_list_get_delete(api, secrets):
    token = secrets["admin"]
    body = {"name": "alerts", "url": "https://hooks.example.com/vc"}
    made = api.post("/webhooks", body, token=token)
    assert made.status_code == 201, made.content
    hook = made.json()
    assert hook["secret"].startswith("whsec_") and hook["events"] == EventType.values
    assert Webhook.objects.get().secret == hook["secret"]
    shown = {key: value for key, value in hook.items() if key != "secret"}
    listed = api.get("/webhooks", token=secrets["viewer"]).json()
    assert listed["items"] == [shown]  # the secret is never shown again
    assert api.get(f"/webhooks/{hook['id']}", token=secrets["viewer"]).json() == shown
    assert api.get(f"/webhooks/{hook['id']}", token=secrets["other"]).status_code == 404
    assert api.get("/webhooks", token=secrets["other"]).json()["items"] == []
    assert api.delete(f"/webhooks/{hook['id']}", token=secrets["viewer"]).status_code == 403
    gone = api.delete(f"/webhooks/{hook['id']}", token=token)
    assert gone.status_code == 204 and not Webhook.objects.exists()
    assert api.delete(f"/webhooks/{hook['id']}", token=token).status_code == 404


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"url": "ftp://hooks.example.com/"}, "webhook_url_scheme", "url"),
        ({"url": "https://u:p@hooks.example.com/"}, "webhook_url_credentials", "url"),
        ({"url": "http://169.254.169.254/"}, "webhook_url_address", "url"),
        ({"events": []}, "webhook_events_required", "events"),
        ({"events": ["cluster.deleted"]}, "webhook_event_unknown", "events"),
    ],
)
def test_a_refused_webhook_is_a_problem_with_its_code(api, secrets, body, code, field):
    payload = {"name": "alerts", "url": "https://hooks.example.com/vc"} | body
    response = api.post("/webhooks", payload, token=secrets["admin"])
    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == code and problem["field"] == field
    assert not Webhook.objects.exists()


def test_english_on_request(api, secrets):
    response = api.post(
        "/webhooks",
        {"name": "alerts", "url": "gopher://x"},
        token=secrets["admin"],
        headers={"Accept-Language": "en"},
    )
    assert response.status_code == 422
    assert "http://" in response.json()["detail"] and "scheme" in response.json()["detail"]


def test_a_test_send_is_accepted_then_logged(
    api, secrets, receiver, django_capture_on_commit_callbacks
):
    receiver.answers = [500]
    made = api.post("/webhooks", {"name": "a", "url": receiver.url}, token=secrets["admin"])
    hook_id = made.json()["id"]
    assert api.post(f"/webhooks/{hook_id}:test", {}, token=secrets["viewer"]).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        sent = api.post(f"/webhooks/{hook_id}:test", {}, token=secrets["operator"])
    assert sent.status_code == 202, sent.content
    assert sent.json()["event_type"] == "webhook.test" and sent.json()["attempt_log"] == []
    log = api.get(f"/webhooks/{hook_id}/deliveries", token=secrets["viewer"]).json()
    (delivery,) = log["items"]
    assert delivery["event_id"] == sent.json()["event_id"] and delivery["status"] == "PENDING"
    assert [(a["number"], a["status_code"]) for a in delivery["attempt_log"]] == [(1, 500)]
    assert delivery["next_attempt_at"] is not None and delivery["attempts"] == 1
    other = api.get(f"/webhooks/{hook_id}/deliveries", token=secrets["other"])
    assert other.status_code == 404
