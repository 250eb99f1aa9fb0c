"""Helpers of the real tier: the local libvirtd with the built guest image, a host record
with declared GPU slots, the QEMU guest agent, and what must be gone afterwards."""

import base64
import contextlib
import ipaddress
import json
import os
import random
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from portal.compute.backends.libvirt import management, names
from portal.compute.backends.libvirt.connection import lookup
from portal.compute.backends.libvirt.guest import image as guest_image
from portal.compute.backends.libvirt.guest import install as guest_install
from portal.compute.models.hosts import GpuHost
from tests.waiting import wait_until

URI = "qemu:///system"
BOOT_SECONDS = 420  # TCG guests on a loaded 2-core machine: generous, decided by state
DAEMONS = ("virtlogd", "libvirtd")


def ensure_daemons():
    """libvirtd and virtlogd, started when nothing supervises them (no systemd here)."""
    for daemon in DAEMONS:
        if subprocess.run(["pgrep", "-x", daemon], capture_output=True).returncode:
            subprocess.run([daemon, "-d"], check=True)
    wait_for(lambda: _connects(), 30, "libvirtd to answer")


def _connects():
    import libvirt

    try:
        libvirt.open(URI).close()
        return True
    except libvirt.libvirtError:
        return False


def image_or_skip():
    """The built guest image with the daemons up, or the test skipped where it cannot run."""
    if os.geteuid() != 0 or missing_tools():
        pytest.skip(f"the real tier needs root and {missing_tools()} (bash .ci/run installs them)")
    ensure_daemons()
    image, _built = guest_image.build(out=None)
    return image


def far_ids():
    """Start this database's VM and cluster ids far from other databases' (one libvirtd is
    shared: domains and fabric networks are named by id); returns the first."""
    from django.db import connection

    from clusters.models import VirtualCluster
    from vms.models import VirtualMachine

    base = random.randrange(10**6, 10**9)
    with connection.cursor() as cursor:
        for model in (VirtualMachine, VirtualCluster):
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [model._meta.db_table, base]
            )
    return base


@contextlib.contextmanager
def use_libvirt(settings):
    """This process's portal on the libvirt backend, and a second live server of it where its
    guests post: on the management network's host address, as a production portal listens
    on its management address (the network is made first: the address is the host's side
    of it). Yields that server."""
    from pytest_django.live_server_helper import LiveServer

    settings.COMPUTE_BACKEND = "portal.compute.backends.libvirt.LibvirtBackend"
    settings.LIBVIRT_DOMAIN_TYPE = "qemu"
    settings.GUEST_AGENT_INTERVAL = 5
    address = management.portal_endpoint()[0]
    c = conn()
    try:
        management.ensure(c)
    finally:
        c.close()
    server = LiveServer(f"{address}:0")
    settings.LIBVIRT_PORTAL_URL = f"http://{address}:{server.thread.port}"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, str(address)]
    try:
        yield server
    finally:
        server.stop()


def missing_tools():
    return [
        tool
        for tool in (
            "libvirtd",
            "virtlogd",
            "qemu-system-x86_64",
            "qemu-img",
            "mmdebstrap",
            "mkfs.ext4",
        )
        if shutil.which(tool) is None
    ]


def wait_for(predicate, seconds, what):
    """Poll ``predicate`` every half second until it answers something true (its answer)."""
    return wait_until(predicate, seconds, interval=0.5, what=what)


def local_host(zone, fabric_type, gpus=32, vfs=4, gpu_model="H100"):
    """This machine as a GPU host with declared (emulated) GPU slots, its pool holding the
    image's base volume."""
    from portal.compute.backends.libvirt.inventory import sync_host

    host = GpuHost.objects.create(
        name="local",
        zone=zone,
        uri=URI,
        domain_type="qemu",
        fabric=fabric_type,
        block="b1",
        leaf="l1",
        rack="r1",
        emulated_gpus=gpus,
        emulated_gpu_model=gpu_model,
        emulated_vfs=vfs,
    )
    sync_host(host)
    guest_install.install(host, guest_image.current())
    return host


def conn():
    import libvirt

    return libvirt.open(URI)


def agent(dom, command, **arguments):
    import libvirt_qemu

    body = {"execute": command, **({"arguments": arguments} if arguments else {})}
    return json.loads(libvirt_qemu.qemuAgentCommand(dom, json.dumps(body), 10, 0))["return"]


def agent_up(dom):
    import libvirt

    try:
        agent(dom, "guest-ping")
        return True
    except libvirt.libvirtError:
        return False


def guest_exec(dom, *argv, seconds=30):
    """(exit code, stdout) of ``argv`` run in the guest by its QEMU agent."""
    code, out, _err = guest_wait(dom, guest_spawn(dom, *argv), seconds, argv)
    return code, out


def guest_spawn(dom, *argv):
    """Start ``argv`` in the guest by its QEMU agent, its output captured; its pid there."""
    return agent(dom, "guest-exec", path=argv[0], arg=list(argv[1:]), **{"capture-output": True})[
        "pid"
    ]


def guest_wait(dom, pid, seconds, what=""):
    """(exit code, stdout, stderr) of a process ``guest_spawn`` started, once it has exited."""
    status = wait_for(
        lambda: (lambda s: s if s["exited"] else None)(agent(dom, "guest-exec-status", pid=pid)),
        seconds,
        f"{what or pid} in the guest",
    )
    return (
        status.get("exitcode"),
        base64.b64decode(status.get("out-data", "")).decode(),
        base64.b64decode(status.get("err-data", "")).decode(),
    )


def management_ip(dom):
    """The guest's address on the management network (its DHCP lease, as the guest has it),
    once it has one."""
    block = management.network_block().network

    def leased():
        _code, out = guest_exec(dom, "/bin/sh", "-c", "ip -4 -o addr show")
        found = [
            a.split("/")[0]
            for a in out.split()
            if "/" in a and ipaddress.ip_address(a.split("/")[0]) in block
        ]
        return found[0] if len(found) == 1 else None

    return wait_for(leased, BOOT_SECONDS, "a management address")


def leftovers(vm_ids, cluster_ids):
    """Domains, networks, volumes and management reservations of these VMs and clusters that
    libvirt still has."""
    c = conn()
    try:
        doms = {names.domain_name(i) for i in vm_ids}
        found = [d.name() for d in c.listAllDomains(0) if d.name() in doms]
        nets = {names.network_name(i) for i in cluster_ids}
        found += [n.name() for n in c.listAllNetworks(0) if n.name() in nets]
        mgmt = lookup(c.networkLookupByName, management.network_name())
        if mgmt is not None:  # the management network's reservations for these VMs
            reserved = ET.fromstring(mgmt.XMLDesc(0)).iterfind("ip/dhcp/host")
            found += [h.get("name") for h in reserved if h.get("name") in doms]
        for pool in c.listAllStoragePools(0):
            if pool.isActive():
                pool.refresh(0)
                found += [
                    v
                    for v in pool.listVolumes()
                    if any(v.startswith(f"{n}.") or v.startswith(f"{n}-") for n in doms)
                ]
        return found
    finally:
        c.close()


def destroy_everything(vm_ids, cluster_ids):
    """Whatever a failed test left: its domains (and their management reservations), fabric
    networks and volumes."""
    import libvirt

    c = conn()
    try:
        doms = {names.domain_name(i) for i in vm_ids}
        for dom in c.listAllDomains(0):
            if dom.name() in doms:
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
                management.release(c, names.vm_id_of(dom.name()))
        nets = {names.network_name(i) for i in cluster_ids}
        for net in c.listAllNetworks(0):
            if net.name() in nets:
                if net.isActive():
                    net.destroy()
                if net.isPersistent():
                    net.undefine()
        for pool in c.listAllStoragePools(0):
            if not pool.isActive():
                continue
            for name in pool.listVolumes():
                if any(name.startswith(f"{n}.") or name.startswith(f"{n}-") for n in doms):
                    try:
                        pool.storageVolLookupByName(name).delete(0)
                    except libvirt.libvirtError:
                        pass
    finally:
        c.close()


PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=4).close()
        print(target, "open")
    except OSError:
        print(target, "closed")
"""


def reachable(dom, *targets):
    """Which ``host:port`` targets a TCP connect from inside the guest reaches."""
    code, out = guest_exec(dom, "/usr/bin/python3", "-c", PROBE, *targets, seconds=60)
    assert code == 0, out
    return {
        target: state == "open"
        for target, state in (line.split() for line in out.split("\n") if line)
    }
