"""The agent's cluster files (``metrics.vm_agent.cluster``), written into a temp root: what
each says, their modes, blocks beside what others wrote, nothing rewritten when nothing
changed, whole-file replacement (never through a symlink), everything removed when the VM
leaves its cluster; and the round trip against the live portal."""

import os
import stat
import threading

import pytest

from metrics.vm_agent import cluster as agent_cluster
from metrics.vm_agent.cluster import BEGIN, END, ClusterFiles, ClusterSync

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
PRIVATE = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----\n"


def member(rank, name, address, keys=()):
    return {
        "id": rank + 10,
        "name": name,
        "hostname": name,
        "rank": rank,
        "address": address,
        "fabric_ip": address,
        "private_ip": f"10.9.0.{rank + 1}",
        "slots": 8,
        "host_keys": [{"key": key, "fingerprint": "SHA256:x"} for key in keys],
    }


def a_view(rank=1, private=PRIVATE, names=("n0", "n1", "n2")):
    members = [member(i, name, f"10.200.0.{i + 2}", [KEY]) for i, name in enumerate(names)]
    return {
        "cluster": {"id": 1, "name": "ring", "status": "RUNNING"},
        "rank": rank,
        "nnodes": len(members),
        "master_addr": members[0]["address"],
        "master_port": 29500,
        "nproc_per_node": 8,
        "members": members,
        "ssh": {
            "user": "vc",
            "public_key": private and KEY + " vc-cluster-1",
            "private_key": private,
        },
        "version": "v1",
    }


@pytest.fixture
def root(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_text("127.0.0.1 localhost\n127.0.1.1 n1\n")
    ssh = tmp_path / "home" / "vc" / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    seed = "# vc-nocloud: the seed's keys (rewritten at every boot)\nssh-ed25519 USER\n"
    (ssh / "authorized_keys").write_text(seed + "# vc-nocloud: end\n")
    (ssh / "config").write_text("Host github.com\n    User git\n")
    return tmp_path


def files_at(root):
    return ClusterFiles(root, home=root / "home" / "vc", owner=(os.getuid(), os.getgid()))


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_each_file_says_what_the_view_says(root):
    written = files_at(root).apply(a_view())
    assert len(written) == 8
    hosts = (root / "etc" / "hosts").read_text()
    assert hosts == (
        f"127.0.0.1 localhost\n127.0.1.1 n1\n{BEGIN}\n10.200.0.2\tn0\n10.200.0.4\tn2\n{END}\n"
    )
    assert (root / "etc" / "vc" / "hostfile").read_text() == (
        "10.200.0.2 slots=8  # rank 0 n0\n"
        "10.200.0.3 slots=8  # rank 1 n1\n"
        "10.200.0.4 slots=8  # rank 2 n2\n"
    )
    env = (root / "etc" / "vc" / "cluster.env").read_text()
    assert "VC_RANK='1'\n" in env and "VC_NNODES='3'\n" in env
    assert "VC_MASTER_ADDR='10.200.0.2'\n" in env and "VC_NPROC_PER_NODE='8'\n" in env
    ssh = root / "home" / "vc" / ".ssh"
    assert (ssh / "id_vc_cluster").read_text() == PRIVATE
    assert (ssh / "id_vc_cluster.pub").read_text() == KEY + " vc-cluster-1\n"
    authorized = (ssh / "authorized_keys").read_text()
    assert "ssh-ed25519 USER\n# vc-nocloud: end\n" in authorized  # the seed's block kept
    assert authorized.endswith(f"{BEGIN}\n{KEY} vc-cluster-1\n{END}\n")
    config = (ssh / "config").read_text()
    assert config.startswith("Host github.com\n    User git\n")
    assert "Host n0 10.200.0.2 10.9.0.1 n2 10.200.0.4 10.9.0.3\n" in config
    assert "    IdentityFile ~/.ssh/id_vc_cluster\n" in config
    assert "    StrictHostKeyChecking accept-new\n" in config
    assert (ssh / "known_hosts_vc_cluster").read_text() == (
        f"n0,10.200.0.2,10.9.0.1 {KEY}\nn2,10.200.0.4,10.9.0.3 {KEY}\n"
    )


def test_modes_are_exact_whatever_the_umask(root):
    previous = os.umask(0)  # a file made wide by a loose umask would be a leak
    try:
        files_at(root).apply(a_view())
    finally:
        os.umask(previous)
    ssh = root / "home" / "vc" / ".ssh"
    assert mode(ssh / "id_vc_cluster") == 0o600
    assert mode(ssh / "authorized_keys") == mode(ssh / "config") == 0o600
    assert mode(ssh / "id_vc_cluster.pub") == mode(ssh / "known_hosts_vc_cluster") == 0o644
    assert mode(root / "etc" / "vc" / "hostfile") == mode(root / "etc" / "hosts") == 0o644


def test_nothing_is_written_again_when_nothing_changed(root):
    files = files_at(root)
    files.apply(a_view())
    inodes = {p: os.lstat(p).st_ino for p in root.rglob("*") if p.is_file()}
    assert files.apply(a_view()) == []
    assert {p: os.lstat(p).st_ino for p in root.rglob("*") if p.is_file()} == inodes
    # A file someone widened is written again, with its mode.
    (root / "home" / "vc" / ".ssh" / "id_vc_cluster").chmod(0o644)
    assert files.apply(a_view()) == [root / "home" / "vc" / ".ssh" / "id_vc_cluster"]
    assert mode(root / "home" / "vc" / ".ssh" / "id_vc_cluster") == 0o600


def test_a_changed_view_rewrites_only_what_changed_whole(root):
    files = files_at(root)
    files.apply(a_view())
    changed = files.apply(a_view(names=("n0", "spare", "n2")))  # 교체: a spare at rank 1
    assert root / "etc" / "vc" / "hostfile" in changed
    assert "# rank 1 spare" in (root / "etc" / "vc" / "hostfile").read_text()
    assert not list(root.rglob(".*.vc-agent"))  # no partial file left behind


def test_a_symlink_in_a_files_place_is_replaced_never_followed(root, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "target"
    outside.write_text("untouched\n")
    (root / "etc" / "vc").mkdir()
    (root / "etc" / "vc" / "hostfile").symlink_to(outside)
    files_at(root).apply(a_view())
    assert outside.read_text() == "untouched\n"
    assert not (root / "etc" / "vc" / "hostfile").is_symlink()


def test_an_ssh_directory_that_is_a_symlink_is_left_alone(root, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    ssh = root / "home" / "vc" / ".ssh"
    for path in ssh.iterdir():
        path.unlink()
    ssh.rmdir()
    ssh.symlink_to(elsewhere, target_is_directory=True)
    files_at(root).apply(a_view())
    assert list(elsewhere.iterdir()) == []
    assert (root / "etc" / "vc" / "hostfile").exists()  # the rest is written


def test_without_the_private_key_no_ssh_file_or_block_stays(root):
    files = files_at(root)
    files.apply(a_view())
    files.apply(a_view(private=None))  # the cluster stopped running
    ssh = root / "home" / "vc" / ".ssh"
    assert not (ssh / "id_vc_cluster").exists() and not (ssh / "known_hosts_vc_cluster").exists()
    assert BEGIN not in (ssh / "authorized_keys").read_text()
    assert (ssh / "config").read_text() == "Host github.com\n    User git\n"
    assert (root / "etc" / "vc" / "hostfile").exists()


def test_leaving_the_cluster_removes_every_file_and_block(root):
    before = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    files = files_at(root)
    files.apply(a_view())
    files.clear()
    after = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    assert after == before


@pytest.fixture
def members(world, django_capture_on_commit_callbacks):
    from clusters import services
    from metrics import services as metrics_services
    from vms.models import VmStatus

    world.capacity(8, fabric="ROCE_V2")
    cluster = world.cluster("ring", fabric_type="ROCE_V2")
    vms = [world.vm(name, private_ip=f"10.0.0.{i + 5}") for i, name in enumerate(("n0", "n1"))]
    for vm in vms:
        services.attach_vm(vm.pk, cluster.pk, actor=world.admin)
    with django_capture_on_commit_callbacks(execute=True):
        services.start_cluster(cluster.pk, actor=world.admin)
    cluster.members.update(status=VmStatus.RUNNING)
    return cluster, [metrics_services.rotate_token(vm.pk, actor=None)[1] for vm in vms]


@pytest.mark.django_db(transaction=True)
def test_against_the_portal_the_agent_writes_reports_and_clears(root, live_server, members):
    from vms.models import HostKey, VirtualMachine

    cluster, (token0, token1) = members
    url = f"{live_server.url}/api/metrics/ingest"
    host_keys = root / "etc" / "ssh"
    host_keys.mkdir()
    (host_keys / "ssh_host_ed25519_key.pub").write_text(KEY + " root@n1\n")
    sync = ClusterSync(url, token1, files_at(root), ssh_dir=str(host_keys))
    assert sync.report_host_keys() is True and sync.report_host_keys() is False
    assert HostKey.objects.get(vm__name="n1").public_key == KEY
    assert sync.sync_once() == "changed"
    assert "VC_RANK='1'" in (root / "etc" / "vc" / "cluster.env").read_text()
    assert (
        (root / "home" / "vc" / ".ssh" / "id_vc_cluster")
        .read_text()
        .startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    )
    assert sync.sync_once() == "same"  # 304: nothing sent, nothing rewritten
    # n0 learns n1's host key for its known_hosts.
    peer_sync = ClusterSync(url, token0, files_at(root / "n0"), ssh_dir=str(host_keys))
    (root / "n0" / "home" / "vc" / ".ssh").mkdir(parents=True)
    peer_sync.sync_once()
    known = (root / "n0" / "home" / "vc" / ".ssh" / "known_hosts_vc_cluster").read_text()
    assert known.startswith("n1,") and known.endswith(f" {KEY}\n")
    VirtualMachine.objects.filter(name="n1").update(cluster=None, node_rank=None)
    assert sync.sync_once() == "left"
    assert not (root / "etc" / "vc" / "hostfile").exists()
    assert not (root / "home" / "vc" / ".ssh" / "id_vc_cluster").exists()


def test_the_loop_stops_when_asked(root):
    stopping = threading.Event()
    stopping.set()
    calls = []

    class Once(ClusterSync):
        def report_host_keys(self):
            calls.append("keys")

        def sync_once(self):
            calls.append("view")

    Once("http://127.0.0.1:9/api/metrics/ingest", "vcm_x", files_at(root)).loop(stopping)
    assert calls == ["keys", "view"]  # once at start, then it stops
    assert agent_cluster.POLL_EVERY > 0
