"""The libvirt backend and the reconciler, the fabric, UFM and the admin (test driver)."""

import json
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, HTTPServer
from uuid import uuid4

import libvirt
import pytest

from clusters import launch, peers, progress
from clusters import services as cluster_services
from portal.catalog.models import FabricType
from portal.compute.backends.base import GuestHardware
from portal.compute.backends.libvirt import LibvirtBackend, fabric, management, names
from portal.compute.backends.libvirt.fabric import UfmClient
from portal.compute.models.hosts import FabricPartition, Placement
from portal.foundation.errors import BackendError
from portal.models import AuditEvent
from tests.clusters.test_libvirt_backend import running_cluster
from vms import services as vm_services
from vms.models import VmStatus

pytestmark = pytest.mark.django_db


def started_vm(world, hosts, name="solo"):
    vm = world.vm(name, instance_type=hosts.h100x4)
    vm_services.start_vm(vm.pk, actor=world.admin)
    vm.refresh_from_db()
    assert vm.status == VmStatus.RUNNING
    placed = Placement.objects.select_related("domain_host").get(vm=vm)
    return vm, hosts.conn(placed.domain_host).lookupByName(names.domain_name(vm.pk))


@pytest.mark.parametrize(
    ("behind_the_back", "reason"),
    [("destroy", "domain_destroyed"), ("shutdown", "guest_shutdown")],
)
def test_drift_repaired(world, hosts, behind_the_back, reason):
    hosts.add("h0")
    vm, dom = started_vm(world, hosts)
    getattr(dom, behind_the_back)()  # outside the portal
    assert vm.pk in progress.reconcile()
    vm.refresh_from_db()
    assert vm.status == VmStatus.STOPPED
    event = AuditEvent.objects.filter(action="vm.stopped", target_id=vm.pk).latest("at")
    assert event.code == reason
    assert not Placement.objects.get(vm=vm).held  # a stopped standalone VM holds no GPUs
    assert progress.reconcile() == []  # repaired once


def test_a_domain_without_a_vm_is_reported_never_destroyed(world, hosts):
    host = hosts.add("h0")
    conn = hosts.conn(host)
    ours, foreign = names.domain_name(999999), names.domain_name(999998)
    for name, uuid in ((ours, names.domain_uuid(999999)), (foreign, str(uuid4()))):
        conn.defineXML(
            f"<domain type='test'><name>{name}</name><uuid>{uuid}</uuid><memory>1024</memory>"
            "<os><type>hvm</type></os></domain>"
        ).create()
    progress.reconcile()
    progress.reconcile()
    assert conn.lookupByName(ours).isActive() and conn.lookupByName(foreign).isActive()
    # Our name with another portal's UUID is not ours: not even reported.
    (event,) = AuditEvent.objects.filter(action="vm.stray_domain")
    assert event.target_name == ours and event.code == "stray_domain"


def test_leaked_fabric_network_freed_by_reconciler(world, hosts):
    host = hosts.add("h0", emulated_gpus=8, emulated_gpu_model="H100", emulated_vfs=8)
    cluster = world.cluster("leaky", status="TERMINATED")
    conn = hosts.conn(host)
    fabric.FabricManager(lambda h: conn).ensure_network(host, cluster.pk)
    conn.networkDefineXML("<network><name>vc-fab-other</name></network>")  # not ours
    # Another portal's network with one of our names (same prefix, its own UUID).
    theirs = names.network_name(cluster.pk + 1000)
    conn.networkDefineXML(f"<network><name>{theirs}</name><uuid>{uuid4()}</uuid></network>")
    assert cluster.pk in LibvirtBackend().allocated_cluster_ids()
    assert cluster.pk + 1000 not in LibvirtBackend().allocated_cluster_ids()
    progress.reconcile()
    left = [n.name() for n in conn.listAllNetworks()]
    assert names.network_name(cluster.pk) not in left
    assert "vc-fab-other" in left and theirs in left


def test_a_fabric_network_of_another_portal_is_never_joined(world, hosts):
    host = hosts.add("h0", emulated_gpus=8, emulated_gpu_model="H100", emulated_vfs=8)
    conn = hosts.conn(host)
    name = names.network_name(4242)
    conn.networkDefineXML(f"<network><name>{name}</name><uuid>{uuid4()}</uuid></network>")
    with pytest.raises(BackendError):
        fabric.FabricManager(lambda h: conn).ensure_network(host, 4242)
    assert not conn.networkLookupByName(name).isActive()  # left as it was


def test_emulated_fabric_is_an_isolated_network_per_cluster(world, hosts):
    host = hosts.add(
        "h0", FabricType.ROCE_V2, emulated_gpus=8, emulated_gpu_model="H100", emulated_vfs=8
    )
    cluster, members = running_cluster(world, hosts, 2, FabricType.ROCE_V2)
    vm_services.start_vm(members[0].pk, actor=world.admin)
    net = hosts.conn(host).networkLookupByName(names.network_name(cluster.pk))
    root = ET.fromstring(net.XMLDesc(0))
    assert root.find("forward") is None and net.isActive()
    assert root.find("ip") is None  # the host has no address on a fabric
    dom = hosts.conn(host).lookupByName(names.domain_name(members[0].pk))
    xml = ET.fromstring(dom.XMLDesc(0))
    assert xml.find("devices/hostdev") is None  # declared slots: no device is passed
    nics = xml.findall("devices/interface[@type='network']/source")
    assert [n.get("network") for n in nics] == [
        management.network_name(),
        names.network_name(cluster.pk),
    ]


def test_guests_on_declared_slots_have_no_gpu_and_a_soft_fabric(world, hosts):
    """클러스터 검증 plans by this: a guest on declared slots gets no GPU hostdev and no VF."""
    hosts.add("h0", FabricType.ROCE_V2, emulated_gpus=8, emulated_gpu_model="H100", emulated_vfs=8)
    _cluster, members = running_cluster(world, hosts, 2, FabricType.ROCE_V2)
    given = LibvirtBackend().guest_hardware(members)
    assert all(given[vm.pk] == GuestHardware(gpus=0, soft_fabric=True) for vm in members)
    unplaced = world.vm("elsewhere")
    assert LibvirtBackend().guest_hardware([unplaced])[unplaced.pk] == GuestHardware(gpus=8)


def test_infiniband_members_on_declared_slots_are_reached_on_the_fabric_with_one_slot(world, hosts):
    """An InfiniBand cluster on a host without HCAs: each member's peers, hostfile and
    torchrun reach it at its address on the cluster's block (its soft RDMA device's), never
    its management address; a guest without GPUs runs one process, whatever its type says."""
    hosts.add(
        "h0", FabricType.INFINIBAND, emulated_gpus=8, emulated_gpu_model="H100", emulated_vfs=8
    )
    cluster, members = running_cluster(world, hosts, 2, FabricType.INFINIBAND)
    for vm in members:
        vm_services.start_vm(vm.pk, actor=world.admin)
        vm.refresh_from_db()
    block = FabricPartition.objects.get(cluster=cluster).block
    assert [vm.fabric_ip for vm in members] == [fabric.member_ip(block, r) for r in (0, 1)]
    assert all(vm.fabric_guid and vm.fabric_ip != vm.private_ip for vm in members)
    assert launch.hostfile_lines(cluster, members) == [
        f"{fabric.member_ip(block, r)} slots=1" for r in (0, 1)
    ]
    view = peers.member_view(members[1].pk)
    assert view["master_addr"] == fabric.member_ip(block, 0) and view["nproc_per_node"] == 1
    assert [m["address"] for m in view["members"]] == [vm.fabric_ip for vm in members]


def test_member_attached_to_running_cluster_gets_fabric_detached_loses_it(world, hosts):
    hosts.topology()
    cluster, members = running_cluster(world, hosts, 2)
    late = world.vm("late", instance_type=hosts.h100x4)
    cluster_services.attach_vm(late.pk, cluster.pk, actor=world.admin)
    vm_services.start_vm(late.pk, actor=world.admin)
    late.refresh_from_db()
    assert late.status == VmStatus.RUNNING and late.fabric_guid
    placed = Placement.objects.select_related("domain_host").get(vm=late)
    dom = hosts.conn(placed.domain_host).lookupByName(names.domain_name(late.pk))
    assert len(ET.fromstring(dom.XMLDesc(0)).findall("devices/hostdev")) == 5
    vm_services.stop_vm(late.pk, actor=world.admin)
    cluster_services.detach_vm(late.pk, actor=world.admin)
    assert len(ET.fromstring(dom.XMLDesc(0)).findall("devices/hostdev")) == 4  # no VF
    placed.refresh_from_db()
    assert not placed.held and placed.cluster_id is None and not placed.devices.exists()
    # The running cluster keeps the node for its next member (a 교체 spare takes it).
    (kept,) = Placement.objects.filter(cluster=cluster, vm__isnull=True)
    assert kept.devices.count() == 5 and kept.host_id == placed.host_id


class Ufm(BaseHTTPRequestHandler):
    calls = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        Ufm.calls.append((self.command, self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def ufm(settings):
    server = HTTPServer(("127.0.0.1", 0), Ufm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Ufm.calls = []
    settings.UFM_URL = f"http://127.0.0.1:{server.server_port}"
    settings.UFM_USER, settings.UFM_PASSWORD = "admin", "secret"
    yield Ufm.calls
    server.shutdown()


def test_infiniband_partition_programmed_in_ufm(world, hosts, ufm):
    hosts.topology()
    cluster, members = running_cluster(world, hosts, 2)
    pkey = FabricPartition.objects.get(cluster=cluster).pkey_hex
    assert ufm[0] == (
        "POST",
        "/ufmRest/resources/pkeys/add",
        {"pkey": pkey, "index0": False, "ip_over_ib": True},
    )
    method, path, body = ufm[1]
    assert (method, path, body["pkey"], body["membership"]) == (
        "POST",
        "/ufmRest/resources/pkeys/",
        pkey,
        "full",
    )
    assert len(body["guids"]) == 2
    cluster_services.stop_cluster(cluster.pk, actor=world.admin)
    assert ufm[-1] == ("DELETE", f"/ufmRest/resources/pkeys/{pkey}", None)


def test_ufm_client_errors_are_backend_errors():
    from portal.foundation.errors import BackendError

    with pytest.raises(BackendError):
        UfmClient("http://127.0.0.1:9", timeout=1).add_pkey("0x0101")


def test_gpu_hosts_are_for_platform_admins_only(world, hosts, client, django_user_model):
    hosts.add("h0")
    staff = django_user_model.objects.create_user("staff", password="pw-12345678", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/compute/gpuhost/").status_code == 403
    root = django_user_model.objects.create_superuser("root", password="pw-12345678")
    client.force_login(root)
    assert client.get("/admin/compute/gpuhost/").status_code == 200
    response = client.post(
        "/admin/compute/gpuhost/",
        {"action": "sync", "_selected_action": [h.pk for h in _hosts()]},
        follow=True,
    )
    assert response.status_code == 200


def _hosts():
    from portal.compute.models.hosts import GpuHost

    return GpuHost.objects.all()


def test_simulator_observes_what_the_portal_says(world):
    from portal.compute.backends.simulator import SimulatorBackend

    running = world.vm("up", status=VmStatus.RUNNING)
    world.vm("down")
    seen = SimulatorBackend().observe()
    assert set(seen.vms) == {running.pk} and seen.vms[running.pk].running and not seen.strays
    assert progress.reconcile() == []  # nothing drifts in the simulator
    SimulatorBackend().delete_vm(running)  # holds nothing: no-op
    SimulatorBackend().leave_cluster(running, world.cluster())


def test_a_host_with_a_bad_uri_is_refused_in_its_language(world, client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw-12345678")
    client.force_login(root)
    form = {
        "name": "h9", "zone": world.zone_a.pk, "uri": "http://example.com", "domain_type": "",
        "state": "ENABLED", "fabric": "INFINIBAND", "storage_pool": "vc-pool",
        "emulated_gpus": 0, "emulated_vfs": 0, "emulated_numa_nodes": 1,
        "devices-TOTAL_FORMS": 0, "devices-INITIAL_FORMS": 0,
    }  # fmt: skip
    response = client.post("/admin/compute/gpuhost/add/", form, HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 200
    assert "libvirt URI는 qemu://, qemu+ssh://, qemu+tls://, test:// 중 하나로" in (
        response.content.decode()
    )
    assert not _hosts().exists()
    form["uri"] = "qemu+ssh://gpu9/system"
    response = client.post("/admin/compute/gpuhost/add/", form)
    assert response.status_code == 302 and _hosts().get().uri == "qemu+ssh://gpu9/system"


def test_replace_puts_the_spare_on_the_members_node(
    world, hosts, commits, monkeypatch, django_capture_on_commit_callbacks
):
    from django.db import transaction

    from clusters.operations.replace import replace_member

    hosts.add("h0")  # room for exactly two members of the type
    cluster, (member, other) = running_cluster(world, hosts, 2)
    vm_services.start_vm(member.pk, actor=world.admin)
    before = set(Placement.objects.get(vm=member).devices.values_list("pk", flat=True))
    spare = world.vm("spare", instance_type=hosts.h100x4)
    monkeypatch.setattr(transaction, "on_commit", commits)  # the steps follow real commits
    with django_capture_on_commit_callbacks(execute=True):
        replace_member(cluster.pk, member.pk, spare.pk, actor=world.admin)
    spare.refresh_from_db()
    member.refresh_from_db()
    assert spare.status == VmStatus.RUNNING and spare.cluster_id == cluster.pk
    assert member.status == VmStatus.STOPPED and member.cluster_id is None
    assert set(Placement.objects.get(vm=spare).devices.values_list("pk", flat=True)) == before
    assert not Placement.objects.filter(cluster=cluster, vm__isnull=True).exists()


def test_an_unreachable_host_holds_up_nothing_else(world, hosts, tmp_path):
    from portal.compute.models.hosts import GpuHost

    hosts.add("h0")
    GpuHost.objects.create(
        name="down", zone=world.zone_a, uri=f"test://{tmp_path}/missing.xml",
        fabric=FabricType.INFINIBAND,
    )  # fmt: skip
    cluster, members = running_cluster(world, hosts, 2)
    vm_services.start_vm(members[0].pk, actor=world.admin)
    assert progress.reconcile() == []  # observed what it could
    # A host that stops answering is not taken to have lost its guests.
    h0 = GpuHost.objects.get(name="h0")
    real_uri = h0.uri
    GpuHost.objects.filter(pk=h0.pk).update(uri=f"test://{tmp_path}/gone.xml")
    assert progress.reconcile() == []
    members[0].refresh_from_db()
    assert members[0].status == VmStatus.RUNNING
    GpuHost.objects.filter(pk=h0.pk).update(uri=real_uri)
    vm_services.stop_vm(members[0].pk, actor=world.admin)
    cluster_services.stop_cluster(cluster.pk, actor=world.admin)
    assert not FabricPartition.objects.exists() and not Placement.objects.filter(held=True)


def test_a_remote_host_that_failed_is_not_dialled_again_at_once(world, caplog):
    from portal.compute.backends.libvirt import connection
    from portal.compute.models.hosts import GpuHost
    from portal.foundation.errors import BackendError

    host = GpuHost(name="far", zone=world.zone_a, uri="qemu+tls://127.0.0.1:1/system")
    caplog.set_level("WARNING", logger="portal.compute.backends.libvirt.connection")
    for _ in range(3):
        with pytest.raises(BackendError):
            connection.connect(host)
    dialled = [r for r in caplog.records if r.name == "portal.compute.backends.libvirt.connection"]
    assert len(dialled) == 1
    connection.forget(host.uri)


def test_the_management_network_follows_the_portals_address(settings):
    """Ours on an old address is made again on the portal's; an operator's is left as is."""
    conn = libvirt.open("test:///default")
    settings.LIBVIRT_PORTAL_URL = "http://10.0.5.2:8000"
    management.ensure(conn)
    settings.LIBVIRT_PORTAL_URL = "http://10.0.6.2:8000"
    management.ensure(conn)
    net = conn.networkLookupByName(management.network_name())
    assert ET.fromstring(net.XMLDesc(0)).find("ip").get("address") == "10.0.6.2"
    assert net.isActive()
    net.destroy()
    net.undefine()
    theirs = conn.networkDefineXML(
        f"<network><name>{management.network_name()}</name><uuid>{uuid4()}</uuid>"
        "<ip address='192.0.2.9' netmask='255.255.255.0'/></network>"
    )
    management.ensure(conn)
    assert ET.fromstring(theirs.XMLDesc(0)).find("ip").get("address") == "192.0.2.9"
    theirs.destroy()
    theirs.undefine()
    conn.close()


def test_the_info_tab_says_a_fabric_on_declared_slots_is_emulated_roce(world, hosts, client):
    """An InfiniBand cluster on hosts without HCAs runs on Soft-RoCE: the 정보 tab says so,
    beside the type the cluster asked for; a cluster not on such hosts says nothing of it."""
    hosts.add("h0", emulated_gpus=8, emulated_gpu_model="H100", emulated_vfs=8)
    cluster, _members = running_cluster(world, hosts, 2)
    client.force_login(world.admin)
    page = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert 'id="soft-fabric-note"' in page and "Soft-RoCE" in page
    elsewhere = world.cluster("not-placed")
    world.members(elsewhere, 2)
    assert 'id="soft-fabric-note"' not in client.get(f"/clusters/{elsewhere.pk}/").content.decode()
