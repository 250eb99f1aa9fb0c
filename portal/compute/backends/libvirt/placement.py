"""Capacity and placement over the GPU hosts' inventory (pure database work, no libvirt).

A *slot* is room for one member: ``gpu_count`` free GPUs of the type's model and, for a
fabric member, one free VF, all on one NUMA node. A type wider than any NUMA node of a host
takes GPUs across its nodes (pinned to those nodes). A cluster's members go to hosts under
one leaf when a leaf has room for all of them, else under one block, else anywhere; within
that, hosts with the most room first, so a cluster packs onto few hosts.

Callers hold the lock order of ``clusters.locking`` and then the zone's host rows
(``lock_hosts``): two placements in one zone never pick the same devices.
"""

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Case, IntegerField, Q, Value, When

from portal.compute.models.hosts import GpuHost, HostDevice, Placement
from portal.foundation.errors import CapacityUnavailable


@dataclass
class Slot:
    host_id: int
    numa_node: int | None  # None: spans the host's nodes (a type wider than any node)
    gpu_ids: list
    vf_id: int | None


# What placement reads of a host: locking or reading more (the JSON of its CPUs) only costs.
HOST_FIELDS = ("pk", "name", "block", "leaf")


def lock_hosts(zone_id, fabric=None) -> list[GpuHost]:
    """The zone's enabled hosts (of ``fabric`` if given), locked in id order.

    ``FOR NO KEY UPDATE``: placements exclude each other as before, but a row that only
    refers to a host (a placement's ``domain_host`` written at a member's start, checked by
    its foreign key's ``FOR KEY SHARE``) is not held up while another cluster allocates."""
    hosts = GpuHost.objects.select_for_update(no_key=True).filter(
        zone_id=zone_id, state=GpuHost.State.ENABLED
    )
    if fabric is not None:
        hosts = hosts.filter(fabric=fabric)
    return list(hosts.only(*HOST_FIELDS).order_by("pk"))


def hosts_of(zone_id, fabric=None):
    hosts = GpuHost.objects.filter(zone_id=zone_id, state=GpuHost.State.ENABLED)
    hosts = hosts.filter(fabric=fabric) if fabric is not None else hosts
    return list(hosts.only(*HOST_FIELDS))


def slots(hosts, instance_type, needs_vf, free_only=True) -> dict[int, list[Slot]]:
    """Room per host for members of ``instance_type``."""
    return _room(hosts, instance_type, needs_vf, every=not free_only)[0]


def capacity(hosts, instance_type, needs_vf) -> tuple[int, int]:
    """How many members of ``instance_type`` the hosts hold in all, and free now."""
    every, free = _room(hosts, instance_type, needs_vf, every=True, free=True)
    return count(every), count(free)


def _room(hosts, instance_type, needs_vf, *, every=False, free=True) -> list[dict]:
    """Slots per host counting every device and/or counting the free ones, in that order:
    one read of the hosts' GPUs of the type and VFs (a node's width counts taken GPUs too)."""
    gpu = str(HostDevice.Kind.GPU.value)  # a plain str compares faster than the enum member
    of_type = Q(kind=HostDevice.Kind.GPU, model__icontains=instance_type.gpu_model) | Q(
        kind=HostDevice.Kind.VF
    )
    found = HostDevice.objects.filter(of_type, host_id__in=[h.pk for h in hosts], missing=False)
    alls: dict[int, tuple[dict, dict]] = {h.pk: ({}, {}) for h in hosts}
    frees: dict[int, tuple[dict, dict]] = {h.pk: ({}, {}) for h in hosts}
    width: dict[int, dict] = {h.pk: {} for h in hosts}
    rows = found.order_by("pk").values_list("pk", "host_id", "kind", "numa_node", "placement_id")
    for pk, host_id, kind, node, taken in rows:
        side = 0 if kind == gpu else 1
        if side == 0:
            width[host_id][node] = width[host_id].get(node, 0) + 1
        if every:
            alls[host_id][side].setdefault(node, []).append(pk)
        if taken is None:
            frees[host_id][side].setdefault(node, []).append(pk)
    need = instance_type.gpu_count
    widest = {pk: max(nodes.values(), default=0) for pk, nodes in width.items()}
    return [
        {pk: _host_slots(pk, g, v, need, needs_vf, widest[pk]) for pk, (g, v) in by_host.items()}
        for by_host, wanted in ((alls, every), (frees, free))
        if wanted
    ]


def _host_slots(host_id, gpus, vfs, need, needs_vf, width):
    """Slots on one NUMA node each; a type wider than the host's widest node spans nodes."""
    out = []
    if need <= width:
        for node in sorted(gpus):
            free, node_vfs = gpus[node], vfs.get(node, [])
            while len(free) >= need and (node_vfs or not needs_vf):
                out.append(Slot(host_id, node, free[:need], node_vfs.pop(0) if needs_vf else None))
                free = free[need:]
        return out
    free = [pk for node in sorted(gpus) for pk in gpus[node]]
    spare = [pk for node in sorted(vfs) for pk in vfs[node]]
    while len(free) >= need and (spare or not needs_vf):
        out.append(Slot(host_id, None, free[:need], spare.pop(0) if needs_vf else None))
        free = free[need:]
    return out


def count(found) -> int:
    return sum(len(s) for s in found.values())


def choose(hosts, found, n, prefer=()) -> list[Slot]:
    """``n`` slots: under one leaf, else one block, else anywhere; hosts in ``prefer`` (where
    the cluster already is) count first. Raises CapacityUnavailable (without params: the
    caller names what is short) when fewer than ``n`` exist."""
    if n <= 0:
        return []
    if count(found) < n:
        raise CapacityUnavailable()
    prefer = set(prefer)
    by_leaf, by_block = defaultdict(list), defaultdict(list)
    for host in hosts:
        by_leaf[(host.block, host.leaf)].append(host)
        by_block[host.block].append(host)
    for groups in (by_leaf, by_block):
        fitting = [g for g in groups.values() if sum(len(found[h.pk]) for h in g) >= n]
        if fitting:
            # The group where the cluster already is, else the tightest fit.
            best = min(
                fitting,
                key=lambda g: (
                    not any(h.pk in prefer for h in g),
                    sum(len(found[h.pk]) for h in g),
                    g[0].name,
                ),
            )
            return _take(best, found, n, prefer)
    ordered = sorted(hosts, key=lambda h: (h.block, h.leaf, h.name))
    return _take(ordered, found, n, prefer)


def _take(group, found, n, prefer):
    ranked = sorted(group, key=lambda h: (h.pk not in prefer, -len(found[h.pk]), h.name))
    taken: list = []
    for host in ranked:
        for slot in found[host.pk]:
            if len(taken) == n:
                return taken
            taken.append(slot)
    return taken


def bind(slot, *, vm=None, cluster=None, existing=None) -> Placement:
    """Give ``slot``'s devices to a placement (``existing`` is reused: a VM keeps its row and
    with it its home host's identity)."""
    if existing is not None:
        existing.host_id, existing.numa_node = slot.host_id, slot.numa_node
        existing.cluster, existing.held = cluster, True
        existing.save(update_fields=["host", "numa_node", "cluster", "held"])
        placement = existing
    else:
        placement = Placement.objects.create(
            host_id=slot.host_id, vm=vm, cluster=cluster, numa_node=slot.numa_node
        )
    ids = [*slot.gpu_ids, *([slot.vf_id] if slot.vf_id else [])]
    HostDevice.objects.filter(pk__in=ids).update(placement=placement)
    return placement


def bind_many(pairs, cluster) -> None:
    """``bind`` for many ``(slot, VM id or None, existing placement or None)`` in a few
    queries."""
    fresh = []
    for slot, vm_id, existing in pairs:
        if existing is not None:
            bind(slot, cluster=cluster, existing=existing)
        else:
            row = Placement(
                host_id=slot.host_id, vm_id=vm_id, cluster=cluster, numa_node=slot.numa_node
            )
            fresh.append((slot, row))
    Placement.objects.bulk_create([row for _slot, row in fresh])
    owner = {
        device: row.pk
        for slot, row in fresh
        for device in [*slot.gpu_ids, *([slot.vf_id] if slot.vf_id else [])]
    }
    if owner:
        HostDevice.objects.filter(pk__in=owner).update(
            placement=Case(
                *[When(pk=d, then=Value(p)) for d, p in owner.items()],
                output_field=IntegerField(),
            )
        )


def keep_for_cluster(placed) -> Placement:
    """A member leaving a running cluster gives its devices to a reservation of the
    cluster (as an attach reserved one): a 교체 spare, or the next member, takes it at start;
    the next allocation of the cluster drops reservations it does not need."""
    spare = Placement.objects.create(
        host_id=placed.host_id, cluster_id=placed.cluster_id, numa_node=placed.numa_node
    )
    HostDevice.objects.filter(placement=placed).update(placement=spare)
    Placement.objects.filter(pk=placed.pk).update(held=False, cluster=None)
    return spare


def unbind(placements) -> None:
    """Free the devices of ``placements`` (a queryset); rows without a VM go, the others
    stay as their VMs' home."""
    if not placements.exists():
        return
    HostDevice.objects.filter(placement__in=placements).update(placement=None)
    HostDevice.objects.filter(missing=True, placement__isnull=True).delete()
    placements.filter(vm__isnull=True).delete()
    placements.update(held=False, cluster=None)
