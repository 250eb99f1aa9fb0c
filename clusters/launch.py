"""How to use a running cluster's fabric: the hostfile and, per rank, the torchrun line and
the NCCL environment, filled in from the real members.

One module for the Info tab (``clusters.views.clusters``), the API (``/hostfile``, ``/launch``)
and what each member's agent writes on the guest (``clusters.peers``), so they never print
different commands. A member's address is its fabric IP (RoCEv2); an InfiniBand member, which
the portal gives no IP on the fabric (NCCL and MPI's verbs reach it by its HCA), is reached
at its management IP for the rendezvous and SSH. Its rank is its place in ``RANK_ORDER``.
"""

from dataclasses import dataclass

from django.db.models import F
from django.utils.translation import gettext_lazy as _

from portal.catalog.models import FabricType
from portal.compute.backends import get_backend
from vms.models import VirtualMachine

# Members in node_rank order (torchrun's --node_rank, the hostfile), for the console and the
# API alike: a 교체 spare takes the replaced member's place. Rows without a rank (made
# outside join) come last, by id.
RANK_ORDER = (F("node_rank").asc(nulls_last=True), "pk")

NCCL_ENV = {
    FabricType.INFINIBAND: [
        ("NCCL_IB_DISABLE", "0"),
        ("NCCL_IB_HCA", "mlx5"),
        ("NCCL_NET_GDR_LEVEL", "PHB"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
    ],
    FabricType.ROCE_V2: [
        ("NCCL_IB_DISABLE", "0"),
        ("NCCL_IB_HCA", "mlx5"),
        ("NCCL_IB_GID_INDEX", "3"),
        ("NCCL_IB_TC", "106"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
    ],
}
# How a member checks its fabric and where the guide is, per fabric: the product page's
# ibstat on InfiniBand; on RoCEv2 the verbs device (a RoCE port has no subnet manager for
# ibstat to report) and its GIDs, whose RoCE v2 entry at NCCL_IB_GID_INDEX carries the
# member's fabric IP.
FABRIC_GUIDES = {
    FabricType.INFINIBAND: {
        "title": _("InfiniBand 설정 및 벤치마크"),
        "device_title": _("InfiniBand 장치 확인"),
        "device_command": "ibstat",
        "device_note": _(
            "포트마다 State: Active, Physical state: LinkUp 이어야 하고 Rate가 포트 속도와 "
            "같아야 합니다."
        ),
    },
    FabricType.ROCE_V2: {
        "title": _("RoCE 설정 및 벤치마크"),
        "device_title": _("RoCE 장치 확인"),
        "device_command": "ibv_devinfo -d mlx5_0\nshow_gids mlx5_0",
        "device_note": _(
            "ibv_devinfo에서 포트가 PORT_ACTIVE이고 link_layer가 Ethernet이어야 하며, "
            "show_gids에서 인덱스 3의 RoCE v2 GID에 멤버의 패브릭 IP가 보여야 합니다."
        ),
    },
}
MASTER_PORT = 29500
MASTER_PLACEHOLDER = "<master-ip>"


def member_address(vm) -> str | None:
    """Where the other members reach ``vm``: its fabric IP, else its management IP."""
    return vm.fabric_ip or vm.private_ip or None


def slots(cluster, members) -> int:
    """A member's MPI slots and torchrun processes: the GPUs its guest was given, or 1 where
    it has none (a guest on a host of declared slots has none, whatever its type says). No
    members yet: the instance type's GPUs."""
    gpus = cluster.instance_type.gpu_count
    if members:
        given = get_backend().guest_hardware(members, gpus).values()
        gpus = min((hardware.gpus for hardware in given), default=gpus)
    return gpus or 1


@dataclass(frozen=True)
class Rank:
    node_rank: int
    vm: VirtualMachine
    command: str


@dataclass(frozen=True)
class LaunchPlan:
    master_addr: str
    master_port: int
    nproc_per_node: int
    ranks: list[Rank]
    nccl_env: list[tuple[str, str]]

    @property
    def env_lines(self) -> str:
        return "\n".join(f"export {key}={value}" for key, value in self.nccl_env)


def launch_plan(cluster, members) -> LaunchPlan:
    """The torchrun command of each member (rank = position in ``members``, the first is the
    master: ``--master_addr`` its address) and the NCCL variables of the cluster's fabric."""
    per_node = slots(cluster, members)
    master = (member_address(members[0]) if members else None) or MASTER_PLACEHOLDER
    ranks = [
        Rank(
            rank,
            vm,
            f"torchrun --nproc_per_node={per_node} --nnodes={len(members)} "
            f"--node_rank={rank} --master_addr={master} "
            f"--master_port={MASTER_PORT} train.py",
        )
        for rank, vm in enumerate(members)
    ]
    return LaunchPlan(master, MASTER_PORT, per_node, ranks, NCCL_ENV[cluster.fabric_type])


def fabric_usage(cluster, members) -> dict | None:
    """The ready-to-paste lines of the Info tab, filled in from the real members."""
    if not members:
        return None
    plan = launch_plan(cluster, members)
    commands = [{"vm": rank.vm, "line": rank.command} for rank in plan.ranks]
    return {"commands": commands, "nccl_env": plan.env_lines, "master": plan.master_addr}


def hostfile_lines(cluster, members) -> list[str]:
    """``<address> slots=<n>`` per member in rank order (an address not known yet: the
    placeholder ``<ip-of-name>``)."""
    per_node = slots(cluster, members)
    return [f"{member_address(vm) or f'<ip-of-{vm.name}>'} slots={per_node}" for vm in members]


def hostfile_text(cluster, members) -> str:
    lines = hostfile_lines(cluster, members)
    return "".join(f"{line}  # {vm.name}\n" for line, vm in zip(lines, members, strict=True))
