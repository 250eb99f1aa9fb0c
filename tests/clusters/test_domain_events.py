"""A guest that stops on its own is known from libvirt's lifecycle event, not at the
reconciler's next pass; and the reconciler reads its hosts at once, so one slow host costs a
pass its time limit, never the other hosts' answers."""

import threading
from datetime import timedelta
from types import SimpleNamespace

import libvirt
import pytest
from django.utils import timezone

from portal.compute.backends.libvirt import LibvirtBackend, backend, names
from portal.compute.backends.libvirt.events import Watcher
from portal.models import AuditEvent
from vms import progress
from vms.models import VirtualMachine, VmStatus

DEFAULT = "test:///default"  # one in-memory driver shared by this process's connections


@pytest.fixture
def domain():
    """A running domain of ours (our name and UUID) on the shared test driver."""
    conn = libvirt.open(DEFAULT)
    vm_id = 987_654
    dom = conn.defineXML(
        f"<domain type='test'><name>{names.domain_name(vm_id)}</name>"
        f"<uuid>{names.domain_uuid(vm_id)}</uuid><memory>1024</memory>"
        "<os><type>hvm</type></os></domain>"
    )
    dom.create()
    yield vm_id, dom
    if dom.isActive():
        dom.destroy()
    dom.undefine()
    conn.close()


def test_a_destroyed_domain_is_announced_with_its_reason(domain):
    vm_id, dom = domain
    watcher = Watcher()
    assert watcher.watch([SimpleNamespace(uri=DEFAULT)]) == []
    before = timezone.now()
    dom.destroy()  # as virsh destroy would, outside the portal
    stops = []
    assert watcher.drain(stops.append, timeout=60) == 1  # returns at the event, not at 60 s
    watcher.close()
    (stop,) = stops
    assert (stop.vm_id, stop.reason) == (vm_id, "domain_destroyed")
    assert stop.seen_at >= before


def test_a_domain_not_ours_is_not_announced():
    conn = libvirt.open(DEFAULT)
    watcher = Watcher()
    watcher.watch([SimpleNamespace(uri=DEFAULT)])
    conn.lookupByName("test").destroy()  # the driver's own domain: no name of ours
    conn.lookupByName("test").create()
    assert watcher.drain(lambda stop: None, timeout=0.5) == 0
    watcher.close()
    conn.close()


def test_a_host_whose_uri_is_refused_is_not_listened_to():
    uri = "qemu+ssh://host/system?command=/bin/true"
    assert Watcher().watch([SimpleNamespace(uri=uri)]) == [uri]


@pytest.mark.django_db
def test_an_announced_stop_makes_a_running_vm_stopped_with_its_reason(world):
    vm = world.vm("gone", status=VmStatus.RUNNING)
    VirtualMachine.objects.filter(pk=vm.pk).update(
        status_changed_at=timezone.now() - timedelta(minutes=1)
    )
    assert progress.domain_stopped(vm.pk, "domain_destroyed", timezone.now())
    vm.refresh_from_db()
    assert vm.status == VmStatus.STOPPED
    event = AuditEvent.objects.get(action="vm.stopped", target_id=vm.pk)
    assert event.code == "domain_destroyed"


@pytest.mark.django_db
def test_a_vm_started_after_the_event_stays_running(world):
    vm = world.vm("again", status=VmStatus.RUNNING)
    seen_at = timezone.now() - timedelta(seconds=5)  # it (re)started after the stop
    assert not progress.domain_stopped(vm.pk, "domain_destroyed", seen_at)
    assert VirtualMachine.objects.get(pk=vm.pk).status == VmStatus.RUNNING
    assert not progress.domain_stopped(world.vm("stopped").pk, "guest_shutdown", timezone.now())


@pytest.mark.django_db
def test_one_host_that_does_not_answer_costs_the_pass_its_limit_not_the_others(
    world, hosts, settings, monkeypatch, caplog
):
    slow, quick = hosts.add("slow"), hosts.add("quick")
    release = threading.Event()
    read = backend._domains_of

    def held(host):
        if host.pk == slow.pk:
            release.wait(120)  # a qemu+ssh host that hangs
        return read(host)

    monkeypatch.setattr(backend, "_domains_of", held)
    settings.LIBVIRT_OBSERVE_SECONDS = 0.5
    domains = hosts.conn(quick)
    domains.defineXML(
        f"<domain type='test'><name>{names.domain_name(31)}</name>"
        f"<uuid>{names.domain_uuid(31)}</uuid><memory>1024</memory>"
        "<os><type>hvm</type></os></domain>"
    ).create()
    seen = LibvirtBackend().observe()
    release.set()
    assert seen.vms[31].running  # the quick host answered
    assert "domains of host slow unreadable" in caplog.text  # the slow one: skipped this pass
    assert "domains of host quick unreadable" not in caplog.text


@pytest.mark.django_db
def test_the_fabric_networks_of_the_hosts_are_read_at_once_too(
    world, hosts, settings, monkeypatch, caplog
):
    """The reconciler's look for fabric idle clusters still hold reads every host at once:
    a host that hangs is skipped this pass, the others' networks are found."""
    slow, _quick = hosts.add("slow"), hosts.add("quick")
    release = threading.Event()

    def networks(_manager, host):
        if host.pk == slow.pk:
            release.wait(120)  # a qemu+ssh host that hangs
            return []
        return [names.network_name(41)]

    monkeypatch.setattr(backend.fabric.FabricManager, "networks", networks)
    settings.LIBVIRT_OBSERVE_SECONDS = 0.5
    found = LibvirtBackend().allocated_cluster_ids()
    release.set()
    assert found == [41]  # the quick host answered
    assert "fabric networks of host slow unreadable" in caplog.text
    assert "fabric networks of host quick unreadable" not in caplog.text
