"""An agent that stops calling makes its member 의심 on the members tab (``metrics.liveness``): its
calls are noted by the portal's clock, at most every ``WRITE_EVERY`` seconds per process,
and only a running VM whose agent has called since it started is judged."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from clusters.models import ClusterStatus
from metrics import liveness, services
from metrics.models import MetricsToken
from tests.metrics.conftest import sample
from vms import health
from vms.models import VirtualMachine, VmStatus


@pytest.fixture(autouse=True)
def _fresh():
    cache.clear()
    liveness.forget()
    yield
    liveness.forget()


def seen(vm):
    return MetricsToken.objects.get(vm=vm).last_seen_at


def age(vm, seconds):
    """Make VM ``vm``'s agent's last call ``seconds`` old (its start older still)."""
    now = timezone.now()
    VirtualMachine.objects.filter(pk=vm.pk).update(status_changed_at=now - timedelta(hours=1))
    MetricsToken.objects.filter(vm=vm).update(last_seen_at=now - timedelta(seconds=seconds))


def test_a_call_is_noted_by_the_portals_clock_once_per_window(post, token, running_vm):
    assert seen(running_vm) is None  # a new token: no call yet
    # A sample an hour old (a guest whose clock stopped while it was paused): the call is
    # noted at the portal's now, not at the sample's instant.
    assert post(token, {"samples": [sample(timezone.now().timestamp() - 3600)]}).status_code == 200
    first = seen(running_vm)
    assert first is not None and timezone.now() - first < timedelta(minutes=1)
    post(token, {"samples": [sample()]})
    assert seen(running_vm) == first  # within WRITE_EVERY: no second write
    liveness.forget()
    post(token, {"samples": [sample(timezone.now().timestamp() - 2)]})
    assert seen(running_vm) == first  # nor from another process (the batch's statement)
    age(running_vm, liveness.WRITE_EVERY + 1)
    post(token, {"samples": [sample(timezone.now().timestamp() - 1)]})
    assert seen(running_vm) > first
    assert timezone.now() - seen(running_vm) < timedelta(seconds=liveness.WRITE_EVERY)


def test_a_job_poll_and_a_check_count_as_calls(client, token, running_vm):
    auth = {"Authorization": f"Bearer {token}"}
    assert client.post("/api/metrics/check", headers=auth).status_code == 200
    assert seen(running_vm) is not None
    MetricsToken.objects.filter(vm=running_vm).update(last_seen_at=None)
    liveness.forget()
    assert client.post("/api/metrics/jobs/next", headers=auth).status_code in (200, 204)
    assert seen(running_vm) is not None


def test_a_made_up_token_notes_nothing(client, token, running_vm):
    bad = {"Authorization": "Bearer vcm_made-up"}
    assert client.post("/api/metrics/check", headers=bad).status_code == 401
    assert seen(running_vm) is None


def test_only_a_running_vm_that_called_since_it_started_and_then_stopped_is_silent(world):
    vms = {
        name: world.vm(name, status=VmStatus.RUNNING)
        for name in ("silent", "talking", "booting", "before-start", "stopped")
    }
    for vm in vms.values():
        services.rotate_token(vm.pk, actor=None)
    age(vms["silent"], liveness.silent_seconds() + 5)
    age(vms["talking"], 5)
    age(vms["stopped"], 600)
    VirtualMachine.objects.filter(pk=vms["stopped"].pk).update(status=VmStatus.STOPPED)
    # Its agent last called before this start (the VM restarted since): starting, not silent.
    age(vms["before-start"], 600)
    VirtualMachine.objects.filter(pk=vms["before-start"].pk).update(
        status_changed_at=timezone.now() - timedelta(seconds=60)
    )
    ids = [vm.pk for vm in vms.values()]
    assert liveness.silent_vm_ids(ids) == {vms["silent"].pk}
    assert liveness.silent_vm_ids([]) == set()


def test_rotating_the_token_forgets_the_last_call(world):
    vm = world.vm("restarted", status=VmStatus.RUNNING)
    services.rotate_token(vm.pk, actor=None)
    age(vm, 600)
    services.rotate_token(vm.pk, actor=None)  # what a start of a real guest does
    assert seen(vm) is None and liveness.silent_vm_ids([vm.pk]) == set()


def test_the_members_tab_says_which_member_does_not_answer(world, login):
    """Its health (``vms.health``): the beat's sweep makes it 의심, saying why."""
    cluster = world.cluster("live", status=ClusterStatus.RUNNING)
    quiet, fine = world.members(cluster, 2, status=VmStatus.RUNNING)
    for vm in (quiet, fine):
        services.rotate_token(vm.pk, actor=None)
        age(vm, 5)
    client = login("viewer")
    health.sweep()
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert "row-health" not in page
    age(quiet, liveness.silent_seconds() + 1)
    health.sweep()
    page = client.get(f"/clusters/{cluster.pk}/vms/").content.decode()
    assert page.count("row-health") == 1
    row = page[page.index(f'data-vm="{quiet.name}"') :].split("</tr>")[0]
    assert "의심" in row and f"{liveness.silent_seconds()}초 넘게" in row
