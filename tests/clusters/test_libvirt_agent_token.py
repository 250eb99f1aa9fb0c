"""A libvirt guest's metrics token lives as long as the VM runs (test driver): the token its
seed carries stops writing when the VM stops — through the portal or from inside the guest
— and the next start writes a new one into the seed. Revoking is the metrics service's, so it
is audited; the simulator, which writes no seed, leaves a VM's token alone."""

import json

import orjson
import pytest
from django.core.cache import cache
from django.urls import reverse

from clusters import progress
from metrics import services as metrics_services
from metrics.models import MetricsToken
from portal.compute import hooks
from portal.compute.backends.libvirt import names
from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.models.hosts import Placement
from portal.foundation.errors import PermissionRequired
from portal.models import AuditEvent
from tests.metrics.conftest import sample
from vms import services as vm_services
from vms.models import VmStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def seed_tokens(monkeypatch):
    """The metrics token of each seed made, in order (``seed_files`` still does the work)."""
    tokens = []
    real = guest.seed_files

    def seed_files(vm, **kw):
        files = real(vm, **kw)
        user = json.loads(files["user-data"].split(b"\n", 1)[1])
        (env,) = [f["content"] for f in user["write_files"] if f["path"] == guest.ENV_FILE]
        (line,) = [line for line in env.splitlines() if line.startswith("METRICS_AGENT_TOKEN=")]
        tokens.append(line.split("=", 1)[1])
        return files

    monkeypatch.setattr(guest, "seed_files", seed_files)
    cache.clear()  # the ingest's rate windows
    return tokens


@pytest.fixture
def ingest(client):
    """The ingest's status code for one sample sent with ``token``."""

    def post(token):
        return client.generic(
            "POST",
            reverse("metrics:ingest"),
            orjson.dumps({"samples": [sample()]}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        ).status_code

    return post


def start(world, vm):
    vm_services.start_vm(vm.pk, actor=world.admin)  # the task runs eagerly at the commit
    vm.refresh_from_db()
    assert vm.status == VmStatus.RUNNING, vm.error_code


def stop(world, vm):
    vm_services.stop_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.status == VmStatus.STOPPED, vm.error_code


def test_a_stopped_vms_seed_token_no_longer_writes_and_the_next_start_issues_one(
    world, hosts, seed_tokens, ingest
):
    hosts.add("h0")
    vm = world.vm("solo", instance_type=hosts.h100x4)
    start(world, vm)
    (first,) = seed_tokens
    assert ingest(first) == 200

    stop(world, vm)
    assert ingest(first) == 401
    assert not MetricsToken.objects.filter(vm=vm).exists()
    (event,) = AuditEvent.objects.filter(action="vm.metrics_token_revoke", target_id=vm.pk)
    assert event.outcome == AuditEvent.Outcome.SUCCEEDED and event.actor is None

    start(world, vm)
    first_again, second = seed_tokens
    assert first_again == first and second != first
    assert ingest(second) == 200 and ingest(first) == 401


def test_a_guest_shut_down_from_inside_loses_its_token(world, hosts, seed_tokens, ingest):
    hosts.add("h0")
    vm = world.vm("solo", instance_type=hosts.h100x4)
    start(world, vm)
    (token,) = seed_tokens
    placed = Placement.objects.select_related("domain_host").get(vm=vm)
    hosts.conn(placed.domain_host).lookupByName(names.domain_name(vm.pk)).shutdown()
    assert vm.pk in progress.reconcile()  # the portal sees it stopped
    assert ingest(token) == 401


def test_on_the_simulator_a_vms_token_outlives_a_stop(world, commits, ingest):
    vm = world.vm("sim", status=VmStatus.RUNNING)
    _vm, token = metrics_services.rotate_token(vm.pk, actor=world.admin)
    cache.clear()
    stop(world, vm)
    start(world, vm)
    assert ingest(token) == 200
    assert not AuditEvent.objects.filter(action="vm.metrics_token_revoke").exists()


def test_revoking_needs_update_on_the_vm_and_tells_outsiders_nothing(world):
    vm = world.vm("tok")
    metrics_services.rotate_token(vm.pk, actor=None)
    with pytest.raises(PermissionRequired):
        metrics_services.revoke_token(vm.pk, actor=world.users["viewer"])
    assert metrics_services.revoke_token(vm.pk, actor=world.users["other"]) is False
    assert MetricsToken.objects.filter(vm=vm).exists()
    refused = AuditEvent.objects.get(action="vm.metrics_token_revoke")
    assert refused.outcome == AuditEvent.Outcome.REFUSED  # the outsider's try left no event
    assert metrics_services.revoke_token(vm.pk, actor=world.users["operator"]) is True
    assert metrics_services.revoke_token(vm.pk, actor=world.users["operator"]) is False
    assert not MetricsToken.objects.filter(vm=vm).exists()


def test_a_start_that_fails_after_the_seed_was_written_leaves_no_token(
    world, hosts, seed_tokens, ingest
):
    host = hosts.add("h0")
    vm = world.vm("solo", instance_type=hosts.h100x4)
    # Another domain already holds the VM's UUID: defining its own fails after the seed.
    hosts.conn(host).defineXML(
        f"<domain type='test'><name>squatter</name><uuid>{names.domain_uuid(vm.pk)}</uuid>"
        "<memory>1024</memory><os><type>hvm</type></os></domain>"
    )
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.status == VmStatus.STOPPED and vm.error_code
    (token,) = seed_tokens
    assert ingest(token) == 401


def test_the_metrics_app_registers_the_agent_tokens_as_it_loads():
    """The compute layer calls the metrics service through the hook the app registered in
    ``ready()`` (it imports nothing of metrics)."""
    tokens = hooks.agent_tokens()
    assert tokens.issue is metrics_services.rotate_token
    assert tokens.revoke is metrics_services.revoke_token


def test_without_the_hook_a_start_fails_as_the_backends_error(world, hosts, monkeypatch, caplog):
    """No app registered the tokens: the start fails as a backend error the VM shows (never
    an AttributeError out of the task), the log names the hook, and nothing is left running
    or held."""
    monkeypatch.setattr(hooks, "_agent_tokens", None)
    host = hosts.add("h0")
    vm = world.vm("solo", instance_type=hosts.h100x4)
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert (vm.status, vm.error_code) == (VmStatus.STOPPED, "backend_error")
    assert "register_agent_tokens" in caplog.text
    assert names.domain_name(vm.pk) not in [d.name() for d in hosts.conn(host).listAllDomains(0)]
    assert not Placement.objects.filter(vm=vm, held=True).exists()
    assert not MetricsToken.objects.filter(vm=vm).exists()
