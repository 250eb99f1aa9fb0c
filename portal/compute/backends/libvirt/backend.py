"""The libvirt compute backend: real domains on GPU hosts, each host one libvirtd.

Database first, libvirt second: a placement is decided and its devices taken under the
locks (cluster, then the zone's hosts), then the domain is defined and started. Every step
is idempotent and checks what exists (lookups, domain state) rather than error codes, which
differ between drivers. A member's fabric devices come from its cluster's partition at each
start, so one attached to a running cluster gets them and a detached one loses them.
"""

import logging
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor, wait

import libvirt
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from clusters.models import ClusterStatus, VirtualCluster
from portal.catalog.models import FabricType
from portal.compute.backends.base import (
    Capacity,
    ComputeBackend,
    FabricAddress,
    GuestHardware,
    Observation,
    Observed,
)
from portal.compute.backends.libvirt import (
    domain,
    fabric,
    management,
    names,
    placement,
    volumes,
)
from portal.compute.backends.libvirt.connection import connect, domain_type
from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.models.hosts import FabricPartition, GpuHost, HostDevice, Placement
from portal.foundation.errors import BackendError, CapacityUnavailable
from vms.models import VirtualMachine, VmStatus

log = logging.getLogger(__name__)
RUNNING_STATES = {
    libvirt.VIR_DOMAIN_RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED,
    libvirt.VIR_DOMAIN_PAUSED,
    libvirt.VIR_DOMAIN_PMSUSPENDED,
}
SHUTOFF_REASONS = {
    libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN: "guest_shutdown",
    libvirt.VIR_DOMAIN_SHUTOFF_CRASHED: "guest_crashed",
    libvirt.VIR_DOMAIN_SHUTOFF_DESTROYED: "domain_destroyed",
}


class LibvirtBackend(ComputeBackend):
    emits_metrics = False  # guests run the agent and post their own samples

    def __init__(self):
        self.fabric = fabric.FabricManager(connect)

    def guest_hardware(self, vms, gpus=None):
        """A guest whose domain is on a host of declared slots has no GPU and a soft
        fabric (the cluster's isolated network, no VF); elsewhere it has its type's GPUs
        and a VF of a real HCA."""
        given = super().guest_hardware(vms, gpus)
        placed = Placement.objects.filter(vm__in=[vm.pk for vm in vms]).select_related(
            "host", "domain_host"
        )
        for place in placed:
            if place.vm_id is not None and (place.domain_host or place.host).emulated:
                given[place.vm_id] = GuestHardware(gpus=0, soft_fabric=True)
        return given

    def soft_fabric(self, vm_ids):
        # GpuHost.emulated: a host of declared GPU slots (``emulated_gpus`` > 0).
        on_declared = Q(domain_host__emulated_gpus__gt=0) | Q(
            domain_host__isnull=True, host__emulated_gpus__gt=0
        )
        return Placement.objects.filter(on_declared, vm__in=list(vm_ids)).exists()

    # -- capacity and placement ---------------------------------------------------------

    def capacity(self, zone, instance_type, fabric_type):
        hosts = placement.hosts_of(zone.pk, fabric_type)
        total, free = placement.capacity(hosts, instance_type, True)
        return Capacity(total_nodes=total, free_nodes=free)

    def _place(self, hosts, instance_type, zone, fabric_type, n, prefer, needs_vf):
        found = placement.slots(hosts, instance_type, needs_vf)
        try:
            return placement.choose(hosts, found, n, prefer)
        except CapacityUnavailable:
            raise self.shortage(
                zone, instance_type, fabric_type, n, placement.count(found)
            ) from None

    def create_vm(self, vm):
        """No address yet: it is the management network's reservation on the host the VM
        first starts on (``_define``), where it is placed."""
        return None

    def register_cluster(self, cluster):
        """Nothing to prepare: the partition is taken when the cluster first allocates."""

    def allocate(self, cluster, nodes):
        if nodes > fabric.MAX_MEMBERS:
            raise self.shortage(
                cluster.zone, cluster.instance_type, cluster.fabric_type, nodes, fabric.MAX_MEMBERS
            )
        with transaction.atomic():
            VirtualCluster.objects.select_for_update().filter(pk=cluster.pk).exists()
            hosts = placement.lock_hosts(cluster.zone_id, cluster.fabric_type)
            members = list(
                VirtualMachine.objects.filter(cluster=cluster)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
            ids = set(members)
            rows = list(Placement.objects.filter(Q(cluster=cluster) | Q(vm__in=ids)))
            held = [p for p in rows if p.cluster_id == cluster.pk and p.held]
            placed = {p.vm_id for p in held if p.vm_id in ids}
            need = [pk for pk in members if pk not in placed]
            spare = sorted((p for p in held if p.vm_id is None), key=lambda p: -p.pk)
            extra = max(nodes - len(members), 0)  # members about to join a running cluster
            # Detached members' places and spare reservations beyond ``extra`` go.
            drop = [p.pk for p in held if p.vm_id is not None and p.vm_id not in ids]
            drop += [p.pk for p in spare[extra:]]
            if drop:
                placement.unbind(Placement.objects.filter(pk__in=drop))
            want = len(need) + max(extra - len(spare), 0)
            homes = {p.vm_id: p for p in rows if p.vm_id in ids and p.vm_id not in placed}
            prefer = {p.host_id for p in held if p.pk not in drop}
            prefer |= {p.host_id for p in homes.values()}
            chosen = self._place(
                hosts, cluster.instance_type, cluster.zone, cluster.fabric_type, want, prefer, True
            )
            pairs: list[tuple[object, int | None, Placement | None]]
            pairs = [(slot, pk, homes.get(pk)) for pk, slot in zip(need, chosen, strict=False)]
            pairs += [(slot, None, None) for slot in chosen[len(need) :]]
            placement.bind_many(pairs, cluster)
            self._partition(cluster)

    def _partition(self, cluster) -> None:
        """The cluster's partition: the lowest free block, taken in one statement unless the
        cluster holds one already (ON CONFLICT). An allocation in another zone (not
        serialised by these host locks) may take the same block first: nothing is inserted
        then, and the next free block is tried. Plain SQL both PostgreSQL and SQLite (the
        demo's embedded database) speak: a recursive CTE counts the blocks."""
        roce = cluster.fabric_type == FabricType.ROCE_V2
        table = FabricPartition._meta.db_table
        sql = (
            "WITH RECURSIVE b(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM b WHERE n < %s)"  # noqa: S608 - names from the models and constants; values are parameters
            f" INSERT INTO {table} (cluster_id, fabric, block, pkey, vlan, configured, created_at)"
            " SELECT %s, %s, n, CAST(%s AS integer) + n, CAST(%s AS integer) + n, %s, %s FROM b"
            f" WHERE NOT EXISTS (SELECT 1 FROM {table} p WHERE p.block = b.n)"
            " ORDER BY n LIMIT 1 ON CONFLICT DO NOTHING RETURNING id"
        )
        params = [
            fabric.BLOCKS - 1,
            cluster.pk,
            cluster.fabric_type,
            None if roce else fabric.PKEY_BASE,
            fabric.VLAN_BASE if roce else None,
            False,
            timezone.now(),
        ]
        for _attempt in range(16):
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                if cursor.fetchone() is not None:
                    return
            if FabricPartition.objects.filter(cluster_id=cluster.pk).exists():
                return
            if FabricPartition.objects.count() >= fabric.BLOCKS:
                raise CapacityUnavailable()
        raise BackendError()

    # -- the fabric ---------------------------------------------------------------------

    def configure_fabric(self, cluster, members):
        partition = FabricPartition.objects.filter(cluster_id=cluster.pk).first()
        if partition is None:  # released meanwhile
            raise BackendError()
        hosts = list(
            GpuHost.objects.filter(placements__cluster=cluster, placements__held=True).distinct()
        )
        self.fabric.ensure(partition, hosts)
        addresses = {vm.pk: self._address(vm, index, partition) for index, vm in enumerate(members)}
        if partition.pkey is not None and any(not h.emulated for h in hosts):
            self.fabric.join_guids(partition, [a.guid for a in addresses.values()])
        FabricPartition.objects.filter(pk=partition.pk).update(configured=True)
        return addresses

    @staticmethod
    def _address(vm, index, partition) -> FabricAddress:
        """A member's address, fixed by its node rank (its place in the cluster). An
        InfiniBand member has an IP on the cluster's block too (IPoIB on an HCA, Soft-RoCE
        on a host without one): its peers, MPI and the hostfile reach it there."""
        rank = vm.node_rank if vm.node_rank is not None else index
        ip = fabric.member_ip(partition.block, rank)
        if partition.vlan is not None:
            return FabricAddress(ip=ip, gid_index=3)
        return FabricAddress(guid=f"0x248a0703{vm.pk:08x}", lid=rank + 1, ip=ip)

    def release(self, cluster):
        with transaction.atomic():
            VirtualCluster.objects.select_for_update().filter(pk=cluster.pk).exists()
            placement.unbind(Placement.objects.filter(cluster_id=cluster.pk))
            partition = FabricPartition.objects.filter(cluster_id=cluster.pk).first()
            pkey = partition.pkey_hex if partition is not None else ""
        hosts = GpuHost.objects.filter(zone_id=cluster.zone_id).order_by("pk")
        self.fabric.remove(cluster.pk, list(hosts), pkey)
        FabricPartition.objects.filter(cluster_id=cluster.pk).delete()

    def allocated_cluster_ids(self):
        ids = set(FabricPartition.objects.values_list("cluster_id", flat=True))
        ids |= set(
            Placement.objects.filter(cluster__isnull=False).values_list("cluster_id", flat=True)
        )
        hosts = list(GpuHost.objects.order_by("pk"))
        for host, found in zip(hosts, _read_all(hosts, self.fabric.networks), strict=True):
            if found is None:
                log.warning("fabric networks of host %s unreadable", host.name)
                continue
            ids |= {c for c in map(names.cluster_id_of, found) if c is not None}
        return sorted(ids)

    # -- VMs ----------------------------------------------------------------------------

    def start_vm(self, vm, cluster=None):
        with transaction.atomic():
            if cluster is not None:
                cluster = VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
            placed = self._claim(vm, cluster)
        partition = None
        if cluster is not None and cluster.status == ClusterStatus.RUNNING:
            partition = FabricPartition.objects.filter(cluster_id=cluster.pk).first()
        address = None
        if partition is not None:
            vm.node_rank = VirtualMachine.objects.values_list("node_rank", flat=True).get(pk=vm.pk)
            address = self._address(vm, 0, partition)
        try:
            if partition is not None and placed.host.emulated:
                self.fabric.ensure_network(placed.host, cluster.pk)
            dom = self._define(vm, placed, partition, address)
            if not dom.isActive():
                dom.create()
        except (libvirt.libvirtError, BackendError, OSError) as exc:
            log.warning("start of %s failed: %s", names.domain_name(vm.pk), exc)
            volumes.revoke_token(vm.pk)  # it stays stopped: the seed just written is void
            if cluster is None:  # a standalone VM holds nothing unless it runs
                placement.unbind(Placement.objects.filter(pk=placed.pk))
            if isinstance(exc, BackendError) and type(exc) is not BackendError:
                raise  # a typed refusal (no guest image, no management address) says why
            raise BackendError() from exc
        return address

    def _claim(self, vm, cluster) -> Placement:
        """The VM's held placement: kept, a slot its cluster reserved, or a new one.

        A member whose place its cluster's allocation holds (every member of a start) takes
        it under the cluster's lock alone, which every change of the cluster's placements
        holds: the zone's host rows are locked only to choose devices, so starts of
        unrelated clusters never queue behind each other's host locks."""
        if cluster is not None:
            own = Placement.objects.filter(vm=vm, cluster=cluster, held=True).first()
            if own is not None:
                return own
        fabric_type = cluster.fabric_type if cluster is not None else None
        hosts = placement.lock_hosts(vm.zone_id, fabric_type)
        own = Placement.objects.select_for_update().filter(vm=vm).first()
        if own is not None and own.held and own.cluster_id == getattr(cluster, "pk", None):
            return own
        if own is not None and own.held:  # held for another cluster (left it): give back
            placement.unbind(Placement.objects.filter(pk=own.pk))
            own.refresh_from_db()
        if cluster is not None:
            spare = Placement.objects.filter(cluster=cluster, vm__isnull=True, held=True).first()
            if spare is not None:
                spare.vm = vm
                spare.domain_host_id = own.domain_host_id if own is not None else None
                if own is not None:
                    own.delete()
                spare.save(update_fields=["vm", "domain_host"])
                return spare
        prefer = set()
        if own is not None:
            prefer.add(own.host_id)
        if cluster is not None:
            prefer |= set(
                Placement.objects.filter(cluster=cluster).values_list("host_id", flat=True)
            )
        (slot,) = self._place(
            hosts, vm.instance_type, vm.zone, fabric_type, 1, prefer, cluster is not None
        )
        return placement.bind(slot, vm=vm, cluster=cluster, existing=own)

    def _define(self, vm, placed, partition, address, prepare=True):
        """Disk, seed and domain on the placement's host (moved there if elsewhere);
        without ``prepare``, only the domain's definition is rewritten."""
        host = placed.host
        if placed.domain_host_id and placed.domain_host_id != host.pk:
            volumes.remove_domain(placed.domain_host, vm.pk)
        conn = connect(host)
        management.ensure(conn)
        pool = conn.storagePoolLookupByName(host.storage_pool)
        if not pool.isActive():
            pool.create()
        boot = guest.guest_boot(vm, pool)
        if prepare:
            volumes.ensure_disk(pool, vm, boot)
            volumes.write_seed(host, pool, vm, address)
        devices = list(HostDevice.objects.filter(placement=placed).order_by("kind", "address"))
        gpus = [d for d in devices if d.kind == HostDevice.Kind.GPU]
        vfs = [d for d in devices if d.kind == HostDevice.Kind.VF]
        emulated = host.emulated
        xml = domain.build(
            vm,
            host=host,
            domain_type=domain_type(host),
            placement=placed,
            gpus=gpus,
            vf=vfs[0] if vfs else None,
            partition=partition,
            boot=boot,
            memory_mib=(
                settings.LIBVIRT_EMULATED_MEMORY_MIB
                if emulated
                else vm.instance_type.memory_gib * 1024
            ),
            vcpus=settings.LIBVIRT_EMULATED_VCPUS if emulated else vm.instance_type.vcpu,
        )
        dom = conn.defineXML(xml)
        address = management.reserve(conn, vm)  # after the domain: see ``management._prune``
        if address is not None and address != vm.private_ip:
            VirtualMachine.objects.filter(pk=vm.pk).update(private_ip=address)
            vm.private_ip = address
        if placed.domain_host_id != host.pk:
            Placement.objects.filter(pk=placed.pk).update(domain_host=host)
            placed.domain_host = host
        return dom

    def stop_vm(self, vm):
        placed = Placement.objects.select_related("domain_host").filter(vm=vm).first()
        if placed is not None and placed.domain_host is not None:
            dom = volumes.own_domain(connect(placed.domain_host), vm.pk)
            if dom is not None and dom.isActive():
                self._power_off(dom)
        volumes.revoke_token(vm.pk)  # once the guest is off: its last samples are in
        if placed is not None and placed.cluster_id is None and placed.held:
            placement.unbind(Placement.objects.filter(pk=placed.pk))  # a member keeps its node

    @staticmethod
    def _power_off(dom):
        """ACPI shutdown, then power off a guest that ignores it."""
        try:
            dom.shutdown()
        except libvirt.libvirtError:
            pass
        deadline = time.monotonic() + settings.LIBVIRT_SHUTDOWN_SECONDS
        while dom.isActive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if dom.isActive():
            dom.destroy()

    def leave_cluster(self, vm, cluster):
        placed = Placement.objects.select_related("domain_host", "host").filter(vm=vm).first()
        if placed is None:
            return
        if placed.domain_host is not None:
            dom = volumes.own_domain(connect(placed.domain_host), vm.pk)
            if dom is not None and not dom.isActive() and placed.domain_host_id == placed.host_id:
                self._define(vm, placed, None, None, prepare=False)  # no fabric devices
        if placed.cluster_id == cluster.pk and placed.held:
            if cluster.status == ClusterStatus.RUNNING:
                placement.keep_for_cluster(placed)
            else:
                placement.unbind(Placement.objects.filter(pk=placed.pk))

    def delete_vm(self, vm):
        placed = Placement.objects.select_related("domain_host", "host").filter(vm=vm).first()
        if placed is None:
            return
        for host in {placed.host, placed.domain_host} - {None}:
            volumes.remove_domain(host, vm.pk)
        with transaction.atomic():
            placement.unbind(Placement.objects.filter(pk=placed.pk))
            Placement.objects.filter(pk=placed.pk).delete()

    # -- observation --------------------------------------------------------------------

    def observe(self):
        """Every domain of ours (``names.owned_domain``) on the hosts it can reach, all hosts
        read at once, each within ``LIBVIRT_OBSERVE_SECONDS``: one slow or dead host costs
        the pass that long at most, never the others' answers. A VM is seen missing only when
        its host answered: one on an unreachable host is not reported."""
        seen, domains_seen, unreachable = {}, [], set()
        hosts = list(GpuHost.objects.order_by("pk"))
        for host, found in zip(hosts, _read_all(hosts, _domains_of), strict=True):
            if found is None:
                log.warning("domains of host %s unreadable", host.name)
                unreachable.add(host.pk)
                continue
            for vm_id, name, state, reason in found:
                if state in RUNNING_STATES:
                    seen[vm_id] = Observed(True)
                elif vm_id not in seen:
                    if state == libvirt.VIR_DOMAIN_CRASHED:
                        why = "guest_crashed"
                    else:
                        why = SHUTOFF_REASONS.get(reason, "domain_stopped")
                    seen[vm_id] = Observed(False, why)
                domains_seen.append((vm_id, name))
        live = set(VirtualMachine.objects.filter(pk__in=seen).values_list("pk", flat=True))
        strays = sorted(name for vm_id, name in domains_seen if vm_id not in live)
        unknown = Q(placement__domain_host__in=unreachable) | Q(placement__host__in=unreachable)
        missing = VirtualMachine.objects.filter(
            Q(placement__domain_host__isnull=False) | Q(status=VmStatus.RUNNING)
        )
        for vm_id in missing.exclude(pk__in=seen).exclude(unknown).values_list("pk", flat=True):
            seen[vm_id] = Observed(False, "domain_missing")
        return Observation(vms=seen, strays=strays)


def _domains_of(host) -> list[tuple[int, str, int, int]]:
    """(VM id, name, state, reason) of every domain of ours on ``host`` (libvirt calls only:
    it runs in a thread of ``_read_all``)."""
    found = []
    for dom in connect(host).listAllDomains(0):
        vm_id = names.owned_domain(dom)
        if vm_id is None:
            continue  # not ours (another name, or our name with another portal's UUID)
        state, reason = dom.state()
        found.append((vm_id, dom.name(), state, reason))
    return found


def _read_all(hosts, read) -> list:
    """``read(host)`` of each host (libvirt calls only), in parallel; None for a host that
    failed or did not answer within ``LIBVIRT_OBSERVE_SECONDS`` (its thread is left to finish
    on its own). The reconciler's reads: one slow host costs a pass that long at most."""
    if not hosts:
        return []
    pool = ThreadPoolExecutor(max_workers=min(len(hosts), settings.LIBVIRT_OBSERVE_THREADS))
    futures = [pool.submit(read, host) for host in hosts]
    wait(futures, timeout=settings.LIBVIRT_OBSERVE_SECONDS)
    pool.shutdown(wait=False, cancel_futures=True)
    answers = []
    for future in futures:
        try:
            answers.append(future.result(timeout=0) if future.done() else None)
        except (BackendError, libvirt.libvirtError, OSError, CancelledError):
            answers.append(None)
    return answers
