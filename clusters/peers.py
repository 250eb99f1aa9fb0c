"""What a member knows of its cluster (``GET /api/metrics/cluster``): its rank, its peers and
their addresses, slots and host keys, rank 0's address, and the cluster's SSH key pair — what
its agent writes to ``/etc/hosts``, the hostfile, ``/etc/vc/cluster.env`` and the login user's
SSH files (``metrics.vm_agent.cluster``).

Ranks, addresses and slots are ``clusters.launch``'s, so the guest's files say what the 정보
tab says. The view carries a ``version`` (a hash of everything in it but the private key,
which changes with the public key): a 교체, a member's new fabric address, a start's new key
or a host key reported change it, and the agent rewrites its files only then.

The private key is in the view only for a member of a 실행중 cluster whose VM is starting or
running, and only the VM's own cluster's (the token names the VM): a VM out of the cluster,
another project's VM or a stopped cluster's token gets none.
"""

import hashlib
import json

from clusters.cluster_key import unseal
from clusters.launch import MASTER_PORT, RANK_ORDER, member_address, slots
from clusters.models import ClusterKey, ClusterStatus, VirtualCluster
from portal.compute.backends.base import guest_hostname
from vms.models import HostKey, VirtualMachine, VmStatus

LOGIN_USER = "vc"  # the guest's login user, whose SSH files the agent writes
KEY_HOLDERS = frozenset({VmStatus.STARTING, VmStatus.RUNNING})
MEMBER_FIELDS = ("id", "name", "status", "node_rank", "private_ip", "fabric_ip")


def host_keys_of(vm_ids) -> dict[int, list[dict]]:
    """Each VM's reported host keys (``type base64`` and fingerprint), by type."""
    found: dict[int, list[dict]] = {}
    rows = HostKey.objects.filter(vm_id__in=vm_ids).order_by("vm_id", "key_type")
    for vm_id, key, fingerprint in rows.values_list("vm_id", "public_key", "fingerprint"):
        found.setdefault(vm_id, []).append({"key": key, "fingerprint": fingerprint})
    return found


def _members(cluster: VirtualCluster) -> list[dict]:
    vms = list(
        VirtualMachine.objects.filter(cluster=cluster).order_by(*RANK_ORDER).only(*MEMBER_FIELDS)
    )
    keys = host_keys_of([vm.pk for vm in vms])
    per_node = slots(cluster, vms)
    taken: set[str] = set()
    members = []
    for rank, vm in enumerate(vms):
        name = guest_hostname(vm)
        members.append(
            {
                "id": vm.pk,
                "name": vm.name,
                # Two members whose names make one hostname: the lower rank keeps it.
                "hostname": None if name in taken else name,
                "rank": rank,
                "address": member_address(vm),
                "fabric_ip": vm.fabric_ip,
                "private_ip": vm.private_ip,
                "slots": per_node,
                "host_keys": keys.get(vm.pk, []),
            }
        )
        taken.add(name)
    return members


def version_of(view: dict) -> str:
    return hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()[:32]


def member_view(vm_id: int) -> dict | None:
    """The cluster as VM ``vm_id``'s agent may see it, or None when the VM is in no cluster
    (or gone). Read without locks: a view a moment old is replaced at the next poll."""
    vm = VirtualMachine.objects.filter(pk=vm_id).values("cluster_id", "status").first()
    if vm is None or vm["cluster_id"] is None:
        return None
    cluster = VirtualCluster.objects.select_related("instance_type").get(pk=vm["cluster_id"])
    members = _members(cluster)
    me = next((m for m in members if m["id"] == vm_id), None)
    if me is None:  # left the cluster between the two reads
        return None
    key = ClusterKey.objects.filter(cluster=cluster).first()
    master = members[0]["address"] if members else None
    view: dict = {
        "cluster": {"id": cluster.pk, "name": cluster.name, "status": cluster.status},
        "rank": me["rank"],
        "nnodes": len(members),
        "master_addr": master,
        "master_port": MASTER_PORT,
        "nproc_per_node": members[0]["slots"],
        "members": members,
        "ssh": {"user": LOGIN_USER, "public_key": None, "private_key": None},
    }
    holds_key = cluster.status == ClusterStatus.RUNNING and vm["status"] in KEY_HOLDERS
    private = unseal(key.sealed_private_key) if holds_key and key is not None else None
    if private is not None and key is not None:
        view["ssh"]["public_key"] = key.public_key
    view["version"] = version_of(view)
    view["ssh"]["private_key"] = private
    return view
