"""``manage.py bench_realvm_start``: the portal's overhead on real guests. 클러스터 시작 +
멤버 모두 시작 of a 4-member cluster through the portal (the libvirt backend on this machine's
libvirtd, tasks run eagerly in this process, one after the other as one worker would), timed
until all four are 실행중, against the same libvirt calls made directly: the cluster's fabric
network defined and started, and per member its overlay volume, its seed volume with the
same seed uploaded, the same domain XML defined, its DHCP reservation on the management
network added (``virNetworkUpdate``, as the portal does once a domain is defined) and the
domain started (recorded from the portal's run
and replayed; odd rounds run the portal first, even rounds the replay of the previous round
first, as the later starts compete with the guests already booting). Prints both figures per
round, their medians and the ratio (target ≤ 1.2).

Needs root, libvirt, QEMU and the built guest image (``bash .ci/realvm-demo`` or
``manage.py build_guest_image``); PostgreSQL, on a scratch database of its own. Each round's
guests are destroyed as soon as they run (4 at most at once); everything is removed at the
end. ``DATABASE_URL=postgres://… DJANGO_SETTINGS_MODULE=tests.settings python manage.py
bench_realvm_start [--rounds 3]``
"""

import logging
import statistics
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test.utils import override_settings

from portal.catalog.models import FabricType
from tests.bench.scratch import scratch_database
from tests.bench.worlds import libvirt_catalog
from vms.models import VirtualMachine, VmStatus

MEMBERS = 4


class Command(BaseCommand):
    help = "Time 4 members to 실행중 through the portal against the same libvirt calls."

    def add_arguments(self, parser):
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--keep", action="store_true", help="keep the scratch database")

    def handle(self, *args, **opts):
        if connection.vendor != "postgresql":
            raise CommandError("bench_realvm_start measures PostgreSQL: set DATABASE_URL")
        from portal.compute.backends.libvirt.guest import image as guest_image

        if guest_image.current() is None:
            raise CommandError("no guest image: run manage.py build_guest_image first")
        from portal.celery import app

        eager = app.conf.task_always_eager
        app.conf.task_always_eager = True
        try:
            with (
                scratch_database(keep=opts["keep"], say=self.stdout.write),
                override_settings(
                    COMPUTE_BACKEND="portal.compute.backends.libvirt.LibvirtBackend",
                    LIBVIRT_DOMAIN_TYPE="qemu",
                ),
            ):
                self.run_bench(opts["rounds"])
        finally:
            app.conf.task_always_eager = eager

    def run_bench(self, rounds):
        from django.contrib.auth import get_user_model

        from clusters import operations
        from clusters import services as cluster_services
        from clusters.models import VirtualCluster
        from portal.compute.backends import get_backend
        from portal.compute.backends.libvirt.guest import image as guest_image
        from portal.compute.backends.libvirt.guest import install as guest_install
        from portal.compute.backends.libvirt.inventory import sync_host
        from portal.compute.models.hosts import GpuHost
        from portal.iam.permissions import BUILTIN_ROLES
        from portal.models import Project, Role, RoleBinding

        zone, itype = libvirt_catalog(8, 192, 2048)
        ib = FabricType.INFINIBAND
        host = GpuHost.objects.create(
            name="local",
            zone=zone,
            uri="qemu:///system",
            domain_type="qemu",
            fabric=ib,
            emulated_gpus=8 * MEMBERS,
            emulated_gpu_model="H100",
            emulated_vfs=MEMBERS,
        )
        sync_host(host)
        guest_install.install(host, guest_image.current())
        project = Project.objects.create(slug="bench", name="bench")
        admin = get_user_model().objects.create_user("bench-admin")
        role, _ = Role.objects.get_or_create(
            name="admin", defaults={"permissions": sorted(BUILTIN_ROLES["admin"])}
        )
        RoleBinding.objects.create(user=admin, project=project, role=role)
        # Ids far from other databases' (domain and network names are per id on one libvirtd).
        with connection.cursor() as cursor:
            for model in (VirtualMachine, VirtualCluster):
                cursor.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)",
                    [model._meta.db_table, 2_000_000_000 + int(time.time()) % 10**8],
                )
        conn = _connect()
        portal_times, direct_times, previous = [], [], None
        logging.disable(logging.INFO)  # the audit and task lines of every step
        try:
            for number in range(1, rounds + 1):
                cluster = VirtualCluster.objects.create(
                    project=project,
                    zone=zone,
                    instance_type=itype,
                    fabric_type=ib,
                    name=f"bench-{number}",
                    status="UNALLOCATED",
                )
                vms = [
                    VirtualMachine.objects.create(
                        project=project,
                        zone=zone,
                        instance_type=itype,
                        name=f"b{number}-{i}",
                        status=VmStatus.STOPPED,
                    )
                    for i in range(MEMBERS)
                ]
                for vm in vms:
                    cluster_services.attach_vm(vm.pk, cluster.pk, actor=admin)
                if previous is not None and number % 2 == 0:  # alternate which goes first
                    direct_times.append(_replay(conn, previous))
                    _remove(conn, previous)
                started = time.perf_counter()
                cluster_services.start_cluster(cluster.pk, actor=admin)
                operations.start_members(cluster.pk, actor=admin)
                running = VirtualMachine.objects.filter(cluster=cluster, status=VmStatus.RUNNING)
                _until(lambda running=running: running.count() == MEMBERS, 600)
                portal_times.append(time.perf_counter() - started)
                previous = _recorded(conn, cluster.pk, [vm.pk for vm in vms])
                _remove(conn, previous)
                if len(direct_times) < len(portal_times):
                    direct_times.append(_replay(conn, previous))
                    _remove(conn, previous)
                # The portal's records catch up (its guests are gone) before the next round.
                operations.stop_cluster_with_members(cluster.pk, actor=admin)
                self.stdout.write(
                    f"round {number}: portal {portal_times[-1]:.2f} s, "
                    f"direct libvirt {direct_times[-1]:.2f} s"
                )
                for vm in vms:
                    get_backend().delete_vm(vm)
                get_backend().release(cluster)
        finally:
            logging.disable(logging.NOTSET)
            conn.close()
        portal, direct = statistics.median(portal_times), statistics.median(direct_times)
        self.stdout.write(
            f"{MEMBERS} members to 실행중 (median of {rounds}): portal {portal:.2f} s, "
            f"the same libvirt calls directly {direct:.2f} s, ratio {portal / direct:.2f} "
            f"(target <= 1.2)"
        )


def _connect():
    import libvirt

    return libvirt.open("qemu:///system")


def _until(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise CommandError(f"not all {MEMBERS} members 실행중 after {seconds} s")
        time.sleep(0.05)


def _recorded(conn, cluster_id, vm_ids):
    """What the portal made in libvirt, as the calls that make it again: the network's XML,
    each VM's volume XMLs (the seed's bytes too) and its domain's inactive XML."""
    import libvirt

    from portal.compute.backends.libvirt import management, names

    pool = conn.storagePoolLookupByName("vc-pool")
    net = conn.networkLookupByName(names.network_name(cluster_id))
    members = []
    for vm_id in vm_ids:
        dom = conn.lookupByName(names.domain_name(vm_id))
        disk = pool.storageVolLookupByName(names.disk_volume(vm_id))
        seed = pool.storageVolLookupByName(names.seed_volume(vm_id))
        with open(seed.path(), "rb") as source:
            data = source.read().rstrip(b"\0")  # the ISO uploaded, not the volume's tail
        data += b"\0" * (-len(data) % 2048)
        members.append(
            {
                "name": dom.name(),
                "xml": dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE),
                "disk": disk.XMLDesc(0),
                "seed_name": seed.name(),
                "seed": data,
                "reservation": management.reservation(conn, vm_id),
            }
        )
    return {
        "network": net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE),
        "net_name": net.name(),
        "members": members,
    }


def _replay(conn, calls):
    """The same libvirt calls, made directly, timed: network, then per member volumes,
    seed upload, define, DHCP reservation and start."""
    from portal.compute.backends.libvirt import management

    started = time.perf_counter()
    mgmt = conn.networkLookupByName(management.network_name())
    net = conn.networkDefineXML(calls["network"])
    net.create()
    pool = conn.storagePoolLookupByName("vc-pool")
    for member in calls["members"]:
        pool.createXML(member["disk"], 0)
        seed = pool.createXML(
            f"<volume><name>{member['seed_name']}</name><capacity unit='KiB'>1024</capacity>"
            "<target><format type='raw'/></target></volume>",
            0,
        )
        stream = conn.newStream(0)
        seed.upload(stream, 0, len(member["seed"]), 0)
        stream.send(member["seed"])
        stream.finish()
        dom = conn.defineXML(member["xml"])
        management.add_reservation(mgmt, member["reservation"])
        dom.create()
    return time.perf_counter() - started


def _remove(conn, calls):
    """Destroy and undefine the domains, remove their volumes, DHCP reservations and the
    network."""
    import libvirt

    from portal.compute.backends.libvirt import management, names

    pool = conn.storagePoolLookupByName("vc-pool")
    for member in calls["members"]:
        _gone(conn.lookupByName, member["name"])
        management.release(conn, names.vm_id_of(member["name"]))
        for name in (f"{member['name']}.qcow2", member["seed_name"]):
            try:
                pool.storageVolLookupByName(name).delete(0)
            except libvirt.libvirtError:
                pass
    _gone(conn.networkLookupByName, calls["net_name"])


def _gone(lookup, name):
    """Destroy (if it runs) and undefine the domain or network ``lookup(name)`` finds, if any."""
    import libvirt

    try:
        found = lookup(name)
        if found.isActive():
            found.destroy()
        found.undefine()
    except libvirt.libvirtError:
        pass
