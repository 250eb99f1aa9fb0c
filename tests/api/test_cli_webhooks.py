"""``vc webhook list|create|test|deliveries|delete`` over HTTP against the live test server:
the secret printed once with a warning, a refused URL exits 1 with the portal's message and
saves nothing, a test send's attempt read back with the receiver's status code."""

import json

import pytest

import vc_cli.main as cli
from portal.iam import tokens
from portal.webhooks.models import Webhook
from vc_cli import http

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def vc(live_server, world, monkeypatch, capsys):
    _token, secret = tokens.issue_token(user=world.admin, project_id=world.demo.pk, name="cli")
    monkeypatch.setenv("VC_URL", live_server.url)
    monkeypatch.setenv("VC_TOKEN", secret)
    monkeypatch.setenv("VC_CONFIG", "/nonexistent")

    def run(*argv):
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_webhooks_through_the_cli(vc, world, receiver):
    code, out, err = vc(
        "-o", "json", "webhook", "create", "alerts", receiver.url,
        "--event", "cluster.status_changed", "--event", "validation.finished",
    )  # fmt: skip
    assert code == 0, err
    made = json.loads(out)
    hook = Webhook.objects.get()
    assert made["secret"] == hook.secret and "한 번만" in err
    assert hook.events == ["validation.finished", "cluster.status_changed"]
    code, out, err = vc("webhook", "create", "bad", "ftp://x/")
    assert code == http.EXIT_REFUSED and "ftp" in err and "(url)" in err
    assert Webhook.objects.count() == 1
    code, out, _err = vc("webhook", "list")
    assert code == 0 and "alerts" in out and hook.secret not in out
    receiver.answers = [500]
    code, out, err = vc("webhook", "test", "alerts")
    assert code == 0 and "webhook.test" in out, err
    code, out, err = vc("webhook", "deliveries", "alerts")
    assert code == 0 and "webhook.test" in out and "500 (" in out, out
    code, out, err = vc("-o", "json", "webhook", "deliveries", str(hook.pk))
    (delivery,) = json.loads(out)
    assert [a["status_code"] for a in delivery["attempt_log"]] == [500]
    code, _out, err = vc("webhook", "delete", "alerts")
    assert code == 0, err
    assert not Webhook.objects.exists()
    code, _out, _err = vc("webhook", "delete", "alerts")
    assert code == http.EXIT_NOT_FOUND
