"""Real guests (marker ``realvm``): two clusters of two TCG guests from the built image boot,
their agents' samples arrive through the ingest API, each member reaches its own cluster's
peer on the fabric and not the other cluster's, a guest reaches nothing on the management
network but the portal's port, 클러스터 검증 on them names the missing GPU tools and judges
the soft fabric port (불량), ACPI shuts a guest down, and stop / start / delete leave no
domain, network or volume behind."""

import ipaddress
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import libvirt
import pytest
from django.conf import settings

from clusters import operations
from clusters import services as cluster_services
from clusters.models import ClusterStatus, Operation
from clusters.models.validation import Verdict
from clusters.validation.verdict import reason_text
from metrics.models import Sample
from portal.catalog.models import FabricType
from portal.compute.backends.libvirt import fabric, names
from portal.compute.backends.libvirt.events import Watcher
from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.models.hosts import FabricPartition
from portal.models import AuditEvent
from vms import progress as vm_progress
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus
from vms.progress import repair_drift

from .guests import (
    BOOT_SECONDS,
    URI,
    agent_up,
    conn,
    guest_exec,
    leftovers,
    local_host,
    management_ip,
    reachable,
    wait_for,
)

pytestmark = [pytest.mark.realvm, pytest.mark.slow]
INGEST_STATUS = """
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(urllib.request.Request(sys.argv[1], b"{}"), timeout=10).status)
except urllib.error.HTTPError as error:
    print(error.code)
"""


def fabric_ip(vm):
    """The member's fabric address as its seed gave it (rank within its cluster's block)."""
    partition = FabricPartition.objects.get(cluster_id=vm.cluster_id)
    vm.refresh_from_db()
    return fabric.member_ip(partition.block, vm.node_rank)


def start_all(world, clusters):
    for cluster in clusters:
        cluster_services.start_cluster(cluster.pk, actor=world.admin)
        cluster.refresh_from_db()
        assert cluster.status == ClusterStatus.RUNNING, cluster.last_error
    for cluster in clusters:
        for vm in cluster.members.all():
            vm_services.start_vm(vm.pk, actor=world.admin)
    running = VirtualMachine.objects.filter(cluster__in=clusters, status=VmStatus.RUNNING)
    wait_for(lambda: running.count() == 4, 120, "4 members 실행중")


def stop_all(world, clusters):
    for cluster in clusters:
        for vm in cluster.members.all():
            vm_services.stop_vm(vm.pk, actor=world.admin)
    stopped = VirtualMachine.objects.filter(cluster__in=clusters, status=VmStatus.STOPPED)
    wait_for(lambda: stopped.count() == 4, 120, "4 members 중지됨")
    for cluster in clusters:
        cluster_services.stop_cluster(cluster.pk, actor=world.admin)


@pytest.mark.django_db(transaction=True)
def test_two_clusters_of_real_guests_boot_report_keep_to_their_fabric_and_leave_nothing(
    world, real
):
    local = local_host(world.zone_a, FabricType.INFINIBAND)
    clusters = []
    for name in ("rv-a", "rv-b"):
        cluster = world.cluster(name, fabric_type=FabricType.INFINIBAND)
        for i in (1, 2):
            vm = world.vm(f"{name}-{i}")
            cluster_services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
        clusters.append(cluster)
    vms = list(VirtualMachine.objects.filter(cluster__in=clusters).order_by("pk"))
    vm_ids = [vm.pk for vm in vms]
    cluster_ids = [c.pk for c in clusters]

    start_all(world, clusters)
    c = conn()
    doms = {vm.pk: c.lookupByName(names.domain_name(vm.pk)) for vm in vms}
    assert all(dom.isActive() for dom in doms.values())
    # The guests boot from the host's pool, which the hypervisor's user can read, never from
    # this checkout (a clone in a 0700 folder is closed to that user).
    os_xml = ET.fromstring(doms[vm_ids[0]].XMLDesc(0)).find("os")
    pool = c.storagePoolLookupByName(local.storage_pool)
    folder = ET.fromstring(pool.XMLDesc(0)).findtext("target/path")
    for boot_file in (os_xml.findtext("kernel"), os_xml.findtext("initrd")):
        assert boot_file.startswith(folder + "/"), boot_file
        assert (
            subprocess.run(
                ["runuser", "-u", "libvirt-qemu", "--", "test", "-r", boot_file]
            ).returncode
            == 0
        )

    # Each guest's agent reports through the ingest API with the token of its seed.
    started, first = time.monotonic(), {}

    def each_reported():
        for vm_id in set(vm_ids) - set(first):
            if Sample.objects.filter(vm_id=vm_id).exists():
                first[vm_id] = time.monotonic() - started
        return len(first) == len(vm_ids)

    wait_for(each_reported, BOOT_SECONDS, "a sample from each of the 4 guests")
    print(
        f"all 4 실행중 to each one's first sample: {min(first.values()):.0f}-"
        f"{max(first.values()):.0f} s"
    )
    sample = Sample.objects.filter(vm_id=vm_ids[0]).order_by("-ts").first()
    assert sample.cpu_util is not None and sample.mem_util is not None
    assert sample.gpu_util is None  # no GPU in the guest: null, never zero

    # 클러스터 검증 on guests without GPUs, on a soft fabric: every member's agent answers its
    # jobs (never 응답 없음), and the GPU steps say 건너뜀 — GPU 없음 (the backend knows the
    # guests got no GPU), never a missing tool. The ring's ib_write_bw and the MPI all-reduce
    # between real guests are judged by their own figures (the soft fabric's baseline).
    operation = operations.start_validation(clusters[0].pk, actor=world.admin)
    wait_for(
        lambda: Operation.objects.get(pk=operation.pk).done,
        BOOT_SECONDS,
        "클러스터 검증 on real guests",
    )
    run = Operation.objects.get(pk=operation.pk).validation
    verdicts = {
        v.vm_name: (v.verdict, [reason_text(r) for r in v.reasons]) for v in run.verdicts.all()
    }
    assert set(verdicts) == {vms[0].name, vms[1].name}
    for verdict, reasons in verdicts.values():
        assert verdict != Verdict.NO_ANSWER, reasons
        assert "GPU 진단: 건너뜀 — GPU 없음" in reasons, reasons
        assert not any("설치되어 있지 않습니다" in reason for reason in reasons), reasons

    # The fabric: its own cluster's peer answers, the other cluster's does not.
    for dom in doms.values():
        wait_for(lambda dom=dom: agent_up(dom), BOOT_SECONDS, "the guest agent")
    a1, a2, b1, b2 = vms
    for here, peer, stranger in ((a1, a2, b1), (b2, b1, a2)):
        dom = doms[here.pk]
        code, out = guest_exec(dom, "/bin/sh", "-c", "ip -4 -o addr show")
        assert f"{fabric_ip(here)}/{fabric.BLOCK_PREFIX}" in out
        assert guest_exec(dom, "/bin/ping", "-c", "2", "-W", "3", fabric_ip(peer))[0] == 0
        assert guest_exec(dom, "/bin/ping", "-c", "2", "-W", "3", fabric_ip(stranger))[0] != 0
    assert ipaddress.ip_address(fabric_ip(a1)) not in ipaddress.ip_network(
        f"{fabric_ip(b1)}/{fabric.BLOCK_PREFIX}", strict=False
    )

    # The management network: a guest reaches the portal's port on the host and nothing else
    # there (PostgreSQL, Redis, SSH, a service listening on every address), nor another guest.
    portal = urlsplit(settings.LIBVIRT_PORTAL_URL)
    with socket.create_server(("0.0.0.0", 0)) as listener:  # noqa: S104 - what guests must miss
        others = [f"{portal.hostname}:{p}" for p in (5432, 6379, 22, listener.getsockname()[1])]
        socket.create_connection((portal.hostname, listener.getsockname()[1]), 4).close()
        assert reachable(doms[a1.pk], portal.netloc, *others) == {
            portal.netloc: True,
            **{other: False for other in others},
        }
    ingest = guest.ingest_url(settings.LIBVIRT_PORTAL_URL)
    code, out = guest_exec(doms[a1.pk], "/usr/bin/python3", "-c", INGEST_STATUS, ingest)
    assert (code, out.strip()) == (0, "401")  # the ingest answers: no token, no entry
    peer = management_ip(doms[b1.pk])
    assert guest_exec(doms[a1.pk], "/bin/ping", "-c", "2", "-W", "3", peer)[0] != 0

    # The guest powers off on the ACPI power button (what virDomainShutdown sends); the
    # reconciler then makes the portal say so, and the member starts again.
    doms[b2.pk].shutdownFlags(libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
    wait_for(lambda: not doms[b2.pk].isActive(), 120, "the ACPI shutdown of a guest")
    assert b2.pk in repair_drift()
    assert VirtualMachine.objects.get(pk=b2.pk).status == VmStatus.STOPPED
    vm_services.start_vm(b2.pk, actor=world.admin)
    assert doms[b2.pk].isActive()

    # libvirt's lifecycle event (``watch_domains``): a guest destroyed outside the portal
    # shows 중지됨, with the reason, without waiting for the reconciler.
    wait_for(lambda: VirtualMachine.objects.get(pk=b2.pk).status == VmStatus.RUNNING, 120, "b2")
    watcher = Watcher()
    assert watcher.watch([local]) == []
    destroyed = time.monotonic()
    subprocess.run(["virsh", "-q", "-c", URI, "destroy", names.domain_name(b2.pk)], check=True)
    watcher.drain(
        lambda stop: vm_progress.domain_stopped(stop.vm_id, stop.reason, stop.seen_at), 60
    )
    took = time.monotonic() - destroyed
    watcher.close()
    assert VirtualMachine.objects.get(pk=b2.pk).status == VmStatus.STOPPED
    assert AuditEvent.objects.filter(action="vm.stopped", target_id=b2.pk, code="domain_destroyed")
    print(f"virsh destroy to 중지됨 (domain_destroyed): {took:.2f} s")
    vm_services.start_vm(b2.pk, actor=world.admin)

    # Stop, start again, then stop and delete: nothing of theirs is left in libvirt.
    stop_all(world, clusters)
    assert not any(dom.isActive() for dom in doms.values())
    start_all(world, clusters)
    assert all(dom.isActive() for dom in doms.values())
    stop_all(world, clusters)
    for vm in vms:
        cluster_services.detach_vm(vm.pk, actor=world.admin)
        vm_services.delete_vm(vm.pk, actor=world.admin)
    for cluster in clusters:
        cluster_services.delete_cluster(cluster.pk, actor=world.admin)
    c.close()
    wait_for(lambda: not leftovers(vm_ids, cluster_ids), 60, "no domain, network or volume")
