"""Issuing and rotating a VM's agent token: shown once, stored hashed, guarded by VM UPDATE."""

import hashlib
import re

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from metrics.models import MetricsToken
from portal.models import AuditEvent

HTMX = {"HX-Request": "true"}


def rotate(client, vm):
    return client.post(reverse("metrics:vm_token_rotate", args=[vm.pk]), headers=HTMX)


def test_operator_gets_a_token_shown_once_and_stored_hashed(login, world):
    vm = world.vm("tok")
    response = rotate(login("operator"), vm)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    token = re.search(r"<code class=\"token\" data-token>(vcm_[\w-]+)</code>", html).group(1)
    assert f"--token {token}" in html and "http://testserver/api/metrics/ingest" in html
    stored = MetricsToken.objects.get(vm=vm)
    assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in {stored.token_hash, stored.prefix} and token.startswith(stored.prefix)
    assert AuditEvent.objects.filter(action="vm.metrics_token", target_id=vm.pk).exists()


def test_rotation_replaces_the_token(login, world):
    vm = world.vm("tok")
    client = login("admin")
    assert rotate(client, vm).status_code == 200
    first = MetricsToken.objects.get(vm=vm).token_hash
    assert rotate(client, vm).status_code == 200
    assert MetricsToken.objects.filter(vm=vm).count() == 1
    assert MetricsToken.objects.get(vm=vm).token_hash != first


def test_viewer_is_refused_naming_the_permission(login, world):
    vm = world.vm("tok")
    response = rotate(login("viewer"), vm)
    assert response.status_code == 403
    assert "Resource.VirtualMachine.UPDATE 권한이 필요합니다." in response.content.decode()
    assert not MetricsToken.objects.exists()


@pytest.mark.parametrize("user", ["other", "norole"])
def test_outsiders_get_404(login, world, user):
    assert rotate(login(user), world.vm("tok")).status_code == 404
    assert not MetricsToken.objects.exists()


def test_anonymous_goes_to_login_and_get_is_refused(client, login, world):
    vm = world.vm("tok")
    response = client.post(reverse("metrics:vm_token_rotate", args=[vm.pk]))
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert login("admin").get(reverse("metrics:vm_token_rotate", args=[vm.pk])).status_code == 405


def test_panel_offers_the_button_only_to_who_may_use_it(world):
    vm = world.vm("tok")
    with_button = render_to_string("metrics/vm_token_panel.html", {"vm": vm, "can_update": True})
    assert reverse("metrics:vm_token_rotate", args=[vm.pk]) in with_button
    assert "토큰 발급" in with_button and "발급된 토큰이 없습니다." in with_button
    without = render_to_string("metrics/vm_token_panel.html", {"vm": vm, "can_update": False})
    assert "hx-post" not in without


def test_panel_shows_the_prefix_of_an_existing_token(login, world):
    vm = world.vm("tok")
    rotate(login("admin"), vm)
    vm.refresh_from_db()
    html = render_to_string("metrics/vm_token_panel.html", {"vm": vm, "can_update": True})
    assert MetricsToken.objects.get(vm=vm).prefix in html
    assert "토큰 재발급" in html and "hx-confirm" in html
