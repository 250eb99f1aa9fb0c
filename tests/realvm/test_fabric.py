"""The fabric carries RDMA (marker ``realvm``). In a started 2-member cluster on a host with
emulated slots each member's fabric NIC has a Soft-RoCE device, rxe0, whose port is active on
that NIC; ``ib_write_bw`` runs from one member to the other over the fabric; ``mpirun`` of an
mpi4py all-reduce across both runs over the fabric NIC, not the management NIC; and sshd
answers the host's management address, never another guest's."""

import re
import socket
import time

import pytest

from clusters import services as cluster_services
from clusters.models import ClusterStatus
from portal.catalog.models import FabricType
from portal.compute.backends.libvirt import fabric, names
from portal.compute.backends.libvirt.guest import boot as guest
from portal.compute.models.hosts import FabricPartition
from vms import services as vm_services
from vms.models import VirtualMachine, VmStatus

from .guests import (
    BOOT_SECONDS,
    agent_up,
    conn,
    guest_exec,
    guest_spawn,
    guest_wait,
    leftovers,
    local_host,
    management_ip,
    reachable,
    wait_for,
)

pytestmark = [pytest.mark.realvm, pytest.mark.slow]
PERFTEST_PORT = 18515  # ib_write_bw's own TCP port for exchanging queue pairs
# Each rank adds rank + 1 over 8 MiB of doubles; every element must come back as the sum.
ALL_REDUCE = """
import array, sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
n = int(sys.argv[1])
send = array.array("d", [comm.rank + 1.0]) * n
got = array.array("d", bytes(8 * n))
comm.Barrier()
started = MPI.Wtime()
comm.Allreduce(send, got, op=MPI.SUM)
took = MPI.Wtime() - started
total = comm.size * (comm.size + 1) / 2
ok = got[0] == total and got[n // 2] == total and got[-1] == total
print(f"rank {comm.rank} of {comm.size} on {MPI.Get_processor_name()}: {8 * n} bytes in "
      f"{took:.3f} s, {'ok' if ok else 'WRONG'}")
"""
DOUBLES = 1 << 20


def nic_by_mac(dom, mac):
    """The name of the guest's interface with this MAC."""
    _code, out = guest_exec(
        dom,
        "/bin/sh",
        "-c",
        'for d in /sys/class/net/*; do echo "${d##*/}" "$(cat $d/address)"; done',
    )
    (name,) = [line.split()[0] for line in out.splitlines() if line.endswith(" " + mac)]
    return name


def management_nic(dom, address):
    _code, out = guest_exec(dom, "/bin/sh", "-c", "ip -4 -o addr show")
    (name,) = [line.split()[1] for line in out.splitlines() if f" {address}/" in line]
    return name


def nic_bytes(dom, *nics):
    """{nic: rx + tx bytes} as the guest's kernel counts them."""
    script = (
        'for n in "$@"; do s=/sys/class/net/$n/statistics; '
        'echo "$n" "$(cat $s/rx_bytes)" "$(cat $s/tx_bytes)"; done'
    )
    code, out = guest_exec(dom, "/bin/sh", "-c", script, "sh", *nics)
    assert code == 0, out
    return {n: int(rx) + int(tx) for n, rx, tx in (line.split() for line in out.splitlines())}


def roce_gid_index(dom, ip):
    """The index of rxe0's RoCEv2 GID that is ``ip`` (IPv4-mapped): the port carries the
    fabric address."""
    mapped = "0000:0000:0000:0000:0000:ffff:" + "{:02x}{:02x}:{:02x}{:02x}".format(
        *map(int, ip.split("."))
    )
    # One grep for the whole table (an unset entry cannot be read: -s keeps quiet about it).
    script = "cd /sys/class/infiniband/rxe0/ports/1/gids && grep -s . *"
    _code, out = guest_exec(dom, "/bin/sh", "-c", script)
    (index,) = [line.split(":", 1)[0] for line in out.splitlines() if line.endswith(mapped)]
    return index


def listening(dom, port):
    """The guest has a TCP socket listening on ``port`` (``/proc/net/tcp``, state 0A)."""
    _code, out = guest_exec(dom, "/bin/cat", "/proc/net/tcp", "/proc/net/tcp6")
    return any(
        fields[1].endswith(f":{port:04X}") and fields[3] == "0A"
        for fields in (line.split() for line in out.splitlines()[1:])
        if len(fields) > 3
    )


def ssh_banner(address, seconds=4):
    """The first line a TCP connection to ``address``:22 from this host reads (None: refused
    or silent)."""
    try:
        with socket.create_connection((address, 22), timeout=seconds) as connection:
            connection.settimeout(seconds)
            return connection.recv(256).split(b"\r\n")[0].decode()
    except OSError:
        return None


def bandwidth(out):
    """(bytes, iterations, peak, average) of perftest's result line (MB/s)."""
    rows = [
        line.split()
        for line in out.splitlines()
        if re.fullmatch(r"\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*", line)
    ]
    assert rows, out
    size, iterations, peak, average, _rate = rows[-1]
    return int(size), int(iterations), float(peak), float(average)


@pytest.mark.django_db(transaction=True)
def test_a_cluster_fabric_carries_soft_roce_rdma_and_mpi_and_its_guests_answer_ssh(world, real):
    local_host(world.zone_a, FabricType.INFINIBAND)
    cluster = world.cluster("rdma", fabric_type=FabricType.INFINIBAND)
    for i in (1, 2):
        vm = world.vm(f"rdma-{i}")
        cluster_services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    a, b = VirtualMachine.objects.filter(cluster=cluster).order_by("pk")
    cluster_services.start_cluster(cluster.pk, actor=world.admin)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.RUNNING, cluster.last_error
    started = time.monotonic()
    for vm in (a, b):
        vm_services.start_vm(vm.pk, actor=world.admin)
    running = VirtualMachine.objects.filter(cluster=cluster, status=VmStatus.RUNNING)
    wait_for(lambda: running.count() == 2, 120, "2 members 실행중")
    c = conn()
    doms = {vm.pk: c.lookupByName(names.domain_name(vm.pk)) for vm in (a, b)}
    partition = FabricPartition.objects.get(cluster=cluster)
    block = fabric.block_network(partition.block)
    ips = {}
    for vm in (a, b):
        vm.refresh_from_db()
        ips[vm.pk] = fabric.member_ip(partition.block, vm.node_rank)

    # sshd: host keys made at first boot, key logins only; the host's management address
    # reaches it, another guest does not.
    for dom in doms.values():
        wait_for(lambda dom=dom: agent_up(dom), BOOT_SECONDS, "the guest agent")
    mgmt = {vm.pk: management_ip(doms[vm.pk]) for vm in (a, b)}
    banners = {
        vm.pk: wait_for(lambda vm=vm: ssh_banner(mgmt[vm.pk]), BOOT_SECONDS, "sshd")
        for vm in (a, b)
    }
    print(f"members started to sshd answering the host: {time.monotonic() - started:.0f} s")
    assert all(banner.startswith("SSH-2.0-OpenSSH") for banner in banners.values()), banners
    code, out = guest_exec(doms[a.pk], "/usr/sbin/sshd", "-T")
    assert code == 0 and "passwordauthentication no" in out.splitlines(), out
    _code, keys = guest_exec(doms[a.pk], "/bin/sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub")
    _code, other_keys = guest_exec(doms[b.pk], "/bin/sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub")
    assert keys and not set(keys.splitlines()) & set(other_keys.splitlines())  # each its own
    assert reachable(doms[b.pk], f"{mgmt[a.pk]}:22") == {f"{mgmt[a.pk]}:22": False}

    # Soft-RoCE: rxe0 on each member's fabric NIC, its port active, its GID the fabric address.
    fabric_nic, mgmt_nic, gid = {}, {}, {}
    for vm in (a, b):
        dom = doms[vm.pk]
        fabric_nic[vm.pk] = nic_by_mac(dom, guest.fabric_mac(vm))
        mgmt_nic[vm.pk] = management_nic(dom, mgmt[vm.pk])
        code, out = guest_exec(dom, "/usr/bin/ibv_devinfo", "-d", "rxe0")
        assert code == 0 and "hca_id:\trxe0" in out and "PORT_ACTIVE" in out, out
        assert re.search(r"link_layer:\s+Ethernet", out), out
        code, out = guest_exec(dom, "/usr/bin/rdma", "link", "show", "rxe0/1")
        assert code == 0 and "state ACTIVE" in out and f"netdev {fabric_nic[vm.pk]}" in out, out
        code, out = guest_exec(dom, "/usr/sbin/ibstat", "rxe0")
        assert code == 0 and "State: Active" in out, out
        gid[vm.pk] = roce_gid_index(dom, ips[vm.pk])
        assert guest_exec(dom, "/bin/ls", "/sys/class/infiniband")[1].split() == ["rxe0"]
    _code, out = guest_exec(doms[a.pk], "/usr/bin/rdma", "link", "show")
    assert mgmt_nic[a.pk] not in out  # the management NIC has no RDMA device

    # ib_write_bw: the server on a, the client on b, over the fabric address of a.
    size, iterations = 65536, 1000
    perftest = ["-d", "rxe0", "-s", str(size), "-n", str(iterations), "-F"]
    server = guest_spawn(doms[a.pk], "/usr/bin/ib_write_bw", *perftest, "-x", gid[a.pk])
    wait_for(lambda: listening(doms[a.pk], PERFTEST_PORT), 120, "ib_write_bw's server")
    client = guest_spawn(doms[b.pk], "/usr/bin/ib_write_bw", *perftest, "-x", gid[b.pk], ips[a.pk])
    code, client_out, client_err = guest_wait(doms[b.pk], client, 600, "ib_write_bw (client)")
    assert code == 0, client_out + client_err
    code, server_out, server_err = guest_wait(doms[a.pk], server, 60, "ib_write_bw (server)")
    assert code == 0, server_out + server_err
    got = bandwidth(client_out)
    assert got[:2] == (size, iterations) and got[3] > 0, client_out
    print(
        f"ib_write_bw {size} B x {iterations} over rxe0: peak {got[2]} MB/s, average {got[3]} MB/s"
    )

    # MPI: an all-reduce across both members, launched from a over SSH to b's fabric
    # address; MPI's own traffic (the launcher's and the messages') kept to the fabric.
    code, out = guest_exec(
        doms[a.pk],
        "/bin/sh",
        "-c",
        "mkdir -p -m 0700 /root/.ssh && rm -f /root/.ssh/id_ed25519* && "
        "ssh-keygen -q -t ed25519 -N '' -C mpirun -f /root/.ssh/id_ed25519 && "
        "cat /root/.ssh/id_ed25519.pub",
        seconds=60,
    )
    assert code == 0, out
    code, _out = guest_exec(
        doms[b.pk],
        "/bin/sh",
        "-c",
        'mkdir -p -m 0700 /root/.ssh && echo "$1" >> /root/.ssh/authorized_keys && '
        "chmod 0600 /root/.ssh/authorized_keys",
        "sh",
        out.strip(),
    )
    assert code == 0
    before = {vm.pk: nic_bytes(doms[vm.pk], fabric_nic[vm.pk], mgmt_nic[vm.pk]) for vm in (a, b)}
    mpirun = [
        "/usr/bin/env",
        "HOME=/root",
        "/usr/bin/mpirun",
        "--allow-run-as-root",
        "-np",
        "2",
        "--host",
        f"{ips[a.pk]}:1,{ips[b.pk]}:1",
        "--mca",
        "plm_rsh_args",
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes",
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        "self,tcp",
        "--mca",
        "btl_tcp_if_include",
        str(block),
        "--mca",
        "oob_tcp_if_include",
        str(block),
        "/usr/bin/python3",
        "-c",
        ALL_REDUCE,
        str(DOUBLES),
    ]
    launched = time.monotonic()
    code, out, err = guest_wait(doms[a.pk], guest_spawn(doms[a.pk], *mpirun), 600, "mpirun")
    took = time.monotonic() - launched
    assert code == 0, out + err
    results = sorted(line for line in out.splitlines() if line.startswith("rank "))
    assert len(results) == 2 and all(line.endswith(", ok") for line in results), out + err
    print(f"mpirun of a 2-rank all-reduce, launch to exit: {took:.1f} s; " + "; ".join(results))
    after = {vm.pk: nic_bytes(doms[vm.pk], fabric_nic[vm.pk], mgmt_nic[vm.pk]) for vm in (a, b)}
    for vm in (a, b):
        on_fabric = after[vm.pk][fabric_nic[vm.pk]] - before[vm.pk][fabric_nic[vm.pk]]
        on_mgmt = after[vm.pk][mgmt_nic[vm.pk]] - before[vm.pk][mgmt_nic[vm.pk]]
        print(f"{vm.name}: fabric {on_fabric} B, management {on_mgmt} B during mpirun")
        assert on_fabric >= 8 * DOUBLES  # the whole vector crossed the fabric at least once
        assert on_mgmt < on_fabric / 50

    # Stop and delete: nothing of theirs is left in libvirt.
    for vm in (a, b):
        vm_services.stop_vm(vm.pk, actor=world.admin)
    stopped = VirtualMachine.objects.filter(cluster=cluster, status=VmStatus.STOPPED)
    wait_for(lambda: stopped.count() == 2, 120, "2 members 중지됨")
    cluster_services.stop_cluster(cluster.pk, actor=world.admin)
    for vm in (a, b):
        cluster_services.detach_vm(vm.pk, actor=world.admin)
        vm_services.delete_vm(vm.pk, actor=world.admin)
    cluster_services.delete_cluster(cluster.pk, actor=world.admin)
    c.close()
    wait_for(lambda: not leftovers([a.pk, b.pk], [cluster.pk]), 60, "no domain, network or volume")
