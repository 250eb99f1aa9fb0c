"""A cluster you can use (marker ``realvm``): what a user does, through the portal's own
services. Register an SSH key, create a RoCEv2 cluster of two members made with it, start the
cluster and its members; once each member's agent has its cluster view and sshd answers,
``ssh`` from this host to rank 0 at the address the portal shows (its ``private_ip``, the
guest's reservation on the management network) runs ``ibv_devinfo`` (an active port) and
``mpirun`` over the agent's hostfile, an all-reduce across the members on the fabric."""

import shlex
import subprocess
import time

import pytest

from clusters import services as cluster_services
from clusters.models import ClusterStatus
from clusters.operations.membership import create_vms
from portal.catalog.models import FabricOffering, FabricType
from portal.compute.backends.libvirt import fabric, names
from portal.compute.models.hosts import FabricPartition
from portal.iam.ssh_keys import create_ssh_key
from vms import services as vm_services
from vms.models import BillingType, VirtualMachine, VmStatus

from .guests import (
    BOOT_SECONDS,
    agent_up,
    conn,
    guest_exec,
    leftovers,
    local_host,
    management_ip,
    wait_for,
)
from .test_fabric import ssh_banner

pytestmark = [pytest.mark.realvm, pytest.mark.slow]
MEMBERS = 3


def ssh(key, known_hosts, address, command, seconds=900):
    """``ssh -i key vc@address command`` from this host: (exit code, output)."""
    argv = [
        "ssh",
        "-i",
        str(key),
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        f"vc@{address}",
        command,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds, check=False)
    out = done.stdout + done.stderr
    print(f"$ {shlex.join(argv)}\n{out}")
    return done.returncode, out


def status(cluster):
    cluster.refresh_from_db()
    return cluster.status


def has_hostfile(dom, members):
    code, out = guest_exec(dom, "/bin/cat", "/etc/vc/hostfile")
    return code == 0 and len(out.split("\n", members - 1)) == members and out


@pytest.mark.django_db(transaction=True)
def test_a_user_reaches_rank_0_by_ssh_and_runs_an_all_reduce_over_the_fabric(world, real, tmp_path):
    local_host(world.zone_a, FabricType.ROCE_V2)
    FabricOffering.objects.get_or_create(
        zone=world.zone_a, instance_type=world.h100, fabric=FabricType.ROCE_V2
    )
    key = tmp_path / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "user@laptop", "-f", str(key)],
        check=True,
    )
    registered = create_ssh_key(
        actor=world.admin,
        project=world.demo,
        name="laptop",
        public_key=key.with_suffix(".pub").read_text(),
    )
    cluster = cluster_services.create_cluster(
        actor=world.admin,
        project=world.demo,
        name="use",
        zone_id=world.zone_a.pk,
        instance_type_id=world.h100.pk,
        fabric_type=FabricType.ROCE_V2,
    )
    wait_for(lambda: status(cluster) == ClusterStatus.UNALLOCATED, 60, "cluster 미할당")
    create_vms(
        actor=world.admin,
        project=world.demo,
        name="use",
        count=MEMBERS,
        zone_id=world.zone_a.pk,
        instance_type_id=world.h100.pk,
        billing_type=BillingType.ON_DEMAND,
        cluster_id=cluster.pk,
        ssh_key_ids=[registered.pk],
    )
    members = VirtualMachine.objects.filter(cluster=cluster).order_by("pk")
    wait_for(lambda: members.count() == MEMBERS, 60, "members created and attached")

    started = time.monotonic()
    cluster_services.start_cluster(cluster.pk, actor=world.admin)
    wait_for(lambda: status(cluster) == ClusterStatus.RUNNING, 120, "실행중")
    for vm in members:
        vm_services.start_vm(vm.pk, actor=world.admin)
    running = members.filter(status=VmStatus.RUNNING)
    wait_for(lambda: running.count() == MEMBERS, 120, "members 실행중")
    c = conn()
    vms = list(members.all())  # read again: the loop above cached them without addresses
    doms = {vm.pk: c.lookupByName(names.domain_name(vm.pk)) for vm in vms}
    for vm in vms:
        dom = doms[vm.pk]
        wait_for(lambda dom=dom: agent_up(dom), BOOT_SECONDS, "the guest agent")
        # The address the portal shows is the one the guest has.
        assert management_ip(dom) == vm.private_ip, (vm.name, vm.private_ip)
        wait_for(lambda dom=dom: has_hostfile(dom, MEMBERS), BOOT_SECONDS, "/etc/vc/hostfile")
        wait_for(lambda vm=vm: ssh_banner(vm.private_ip), BOOT_SECONDS, "sshd")
    reachable_after = time.monotonic() - started
    print(f"cluster start to every member answering SSH: {reachable_after:.0f} s")

    (rank0,) = [vm for vm in vms if vm.node_rank == 0]
    print(f"$ cat /etc/vc/hostfile (rank 0)\n{has_hostfile(doms[rank0.pk], MEMBERS)}")
    known = tmp_path / "known_hosts"
    code, out = ssh(key, known, rank0.private_ip, "ibv_devinfo")
    assert code == 0 and "PORT_ACTIVE" in out, out

    block = fabric.block_network(FabricPartition.objects.get(cluster=cluster).block)
    mpirun = (
        f"mpirun --hostfile /etc/vc/hostfile -np {MEMBERS} --map-by ppr:1:node "
        f"--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include {block} "
        f"--mca oob_tcp_if_include {block} "
        "python3 -m vc_metrics_agent.allreduce -b 1M -e 8M -f 2"
    )
    launched = time.monotonic()
    code, out = ssh(key, known, rank0.private_ip, mpirun)
    print(f"mpirun, launch to exit: {time.monotonic() - launched:.1f} s")
    assert code == 0 and "busbw" in out, out

    for vm in vms:
        vm_services.stop_vm(vm.pk, actor=world.admin)
    stopped = members.filter(status=VmStatus.STOPPED)
    wait_for(lambda: stopped.count() == MEMBERS, 180, "members 중지됨")
    cluster_services.stop_cluster(cluster.pk, actor=world.admin)
    for vm in vms:
        cluster_services.detach_vm(vm.pk, actor=world.admin)
        vm_services.delete_vm(vm.pk, actor=world.admin)
    cluster_services.delete_cluster(cluster.pk, actor=world.admin)
    c.close()
    ids = [vm.pk for vm in vms]
    wait_for(lambda: not leftovers(ids, [cluster.pk]), 60, "no domain, network or volume")
