"""The agent's MPI all-reduce (``python3 -m vc_metrics_agent.allreduce``): its sizes and
nccl-tests' bandwidth arithmetic, its report read back by ``toolparse``, a run on a stand-in
for mpi4py (rank 0's view of a 2-rank world), exit 127 without mpi4py; and how the agent
runs it and finds a soft fabric's device (an interface's address, the RDMA device on it, the
RoCE v2 GID of that address)."""

import io
import sys
import types
from contextlib import redirect_stdout

import pytest

from metrics.vm_agent import allreduce, toolparse
from metrics.vm_agent import jobs as agent_jobs


def test_sizes_bus_factor_and_bandwidths():
    assert allreduce.parse_size("64M") == 64 << 20 and allreduce.parse_size("4K") == 4096
    assert allreduce.parse_size("1000") == 1000
    with pytest.raises(ValueError, match="not a size"):
        allreduce.parse_size("1T")
    assert allreduce.sizes(1 << 20, 64 << 20, 4) == [1 << 20, 4 << 20, 16 << 20, 64 << 20]
    assert allreduce.sizes(6, 6, 2) == [4]  # whole float32 elements
    assert allreduce.bus_factor(2) == 1.0 and allreduce.bus_factor(8) == 1.75
    assert allreduce.bus_factor(1) == 0.0
    algbw, busbw = allreduce.bandwidths(1_000_000_000, 2.0, 4)
    assert algbw == 0.5 and busbw == 0.75  # busbw = algbw * 2(n-1)/n
    assert allreduce.expected_sum(3) == 6.0


def test_the_report_reads_back_as_all_reduce_perf_figures():
    rows = [allreduce.row(s, 2, (s / 0.5e9, 0), (s / 0.4e9, 1)) for s in (1 << 20, 4 << 20)]
    text = allreduce.report([("vc-a", 10), ("vc-b", 11)], rows, [0.5, 0.5], "eth1")
    figures = toolparse.parse("allreduce", text)
    assert figures["runner"] == "mpi" and figures["ranks"] == 2
    assert figures["hosts"] == ["vc-a", "vc-b"] and figures["bytes"] == 4 << 20
    assert figures["busbw_gbs"] == 0.5 and figures["wrong"] == 2  # one in place per row
    assert figures["avg_busbw_gbs"] == 0.5
    with pytest.raises(toolparse.ParseError, match="banner"):
        toolparse.parse("allreduce", text.replace(allreduce.BANNER, "# something"))


class TwoRanks:
    """Rank 0 of two: the other rank contributes 2.0 to every element."""

    def __init__(self, mpi, other=2.0):
        self.mpi, self.other = mpi, other

    def Get_size(self):
        return 2

    def Get_rank(self):
        return 0

    def Barrier(self):
        pass

    def Allreduce(self, send, receive, op):
        source = receive if send is self.mpi.IN_PLACE else send
        for i, value in enumerate(source):
            receive[i] = value + self.other

    def allreduce(self, value, op):
        return value

    def gather(self, value, root):
        return [value, ("vc-b", 4242)]


def fake_mpi4py(monkeypatch, other=2.0):
    mpi = types.SimpleNamespace(SUM="sum", MAX="max", IN_PLACE=object())
    mpi.COMM_WORLD = TwoRanks(mpi, other)
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=mpi))
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)


def run_main(args):
    out = io.StringIO()
    with redirect_stdout(out):
        code = allreduce.main(args)
    return code, out.getvalue()


def test_a_run_prints_nccl_tests_columns(monkeypatch):
    fake_mpi4py(monkeypatch)
    code, text = run_main(["-b", "4K", "-e", "64K", "-f", "4", "-n", "2", "--nic", "eth1"])
    assert code == 0
    figures = toolparse.parse("allreduce", text)
    assert figures["rows"] == 3 and figures["bytes"] == 64 << 10 and figures["wrong"] == 0
    assert figures["hosts"] == ["vc-b", allreduce.socket.gethostname()]
    assert "MPI over eth1" in text and figures["busbw_gbs"] > 0


def test_wrong_sums_are_counted(monkeypatch):
    fake_mpi4py(monkeypatch, other=3.0)
    _code, text = run_main(["-b", "64K", "-e", "64K", "-n", "1"])
    checked = len(allreduce.checked_positions((64 << 10) // 4))
    assert toolparse.parse("allreduce", text)["wrong"] == 2 * checked


def test_without_mpi4py_it_exits_as_a_missing_tool(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails
    assert allreduce.main(["-b", "4K", "-e", "4K"]) == agent_jobs.NOT_FOUND
    assert "mpi4py is not installed" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The agent: a soft fabric's device and the all-reduce's command

INTERFACES = {"eth0": ("192.0.2.2", "255.255.255.0"), "eth1": ("10.0.0.20", "255.255.248.0")}


def soft_sysfs(root, parent=False):
    port = root / "rxe0" / "ports" / "1"
    (port / "gids").mkdir(parents=True)
    (port / "gid_attrs" / "types").mkdir(parents=True)
    gids = [
        ("fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1"),
        ("fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:0a00:0014", "IB/RoCE v1"),
        ("0000:0000:0000:0000:0000:ffff:0a00:0014", "RoCE v2"),
    ]
    for index, (gid, kind) in enumerate(gids):
        (port / "gids" / str(index)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
    if parent:
        (root / "rxe0" / "parent").write_text("eth1\n")
    else:
        (port / "gid_attrs" / "ndevs").mkdir()
        (port / "gid_attrs" / "ndevs" / "3").write_text("eth1\n")
    other = root / "mlx5_0" / "ports" / "1" / "gid_attrs" / "ndevs"
    other.mkdir(parents=True)
    (other / "0").write_text("eth0\n")
    return root


@pytest.mark.parametrize("parent", [False, True])
def test_the_agent_picks_the_device_on_the_fabric_interface_and_its_roce_v2_gid(tmp_path, parent):
    root = soft_sysfs(tmp_path / "ib", parent)
    runner = agent_jobs.JobRunner(
        "http://portal/api/metrics/ingest", "t", infiniband_root=root, interfaces=lambda: INTERFACES
    )
    assert runner.soft_device("10.0.0.20") == ("rxe0", 3)
    assert runner.soft_device("10.9.9.9") is None
    assert agent_jobs.fabric_interface("10.0.0.20", INTERFACES) == ("eth1", "10.0.0.0/21")


def test_a_soft_ib_job_runs_over_that_device(tmp_path, monkeypatch):
    root = soft_sysfs(tmp_path / "ib")
    ran = []
    monkeypatch.setattr(agent_jobs.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(
        agent_jobs,
        "run_tool",
        lambda tool, argv, timeout, **extra: (
            ran.append(argv) or {"tool": tool, "stdout": "", "exit_code": 0, **extra}
        ),
    )
    pinged = []
    monkeypatch.setattr(agent_jobs, "resolve_neighbour", lambda a, s: pinged.append(a))
    runner = agent_jobs.JobRunner(
        "http://portal/api/metrics/ingest", "t", infiniband_root=root, interfaces=lambda: INTERFACES
    )
    params = {"ports": 1, "base_port": 18515, "bytes": 1 << 20, "seconds": 5, "gid_index": 3}
    job = {"id": 1, "kind": "ib_client", "timeout": 180}
    soft = {**params, "device": "auto", "address": "10.0.0.20", "server": "10.0.0.21"}
    outputs = runner.execute({**job, "params": soft})
    assert [o["tool"] for o in outputs] == ["ports", "ib_write_bw", "ports"]
    assert ran[0][:3] == ["ib_write_bw", "-d", "rxe0"] and ran[0][-3:] == ["-x", "3", "10.0.0.21"]
    # A soft fabric's few MB/s would read 0.00 or 0.01 in Gb/s (two decimals): MB/s here.
    assert "--report_gbits" not in ran[0]
    assert pinged == ["10.0.0.21"]  # the server's neighbour entry before the queue pair
    missing = runner.execute({**job, "params": {**soft, "address": "10.9.9.9"}})
    assert missing[0]["exit_code"] == 1 and "no RDMA device" in missing[0]["stdout"]


def test_the_all_reduce_runs_one_process_per_node_on_the_fabric(monkeypatch):
    params = {"runner": "mpi", "nodes": 3, "address": "10.0.0.20", "args": ["-b", "1M"]}
    argv = agent_jobs.mpi_allreduce_argv(params, ("eth1", "10.0.0.0/21"), python="/usr/bin/py")
    assert argv == [
        *("mpirun", "-np", "3", "--hostfile", "/etc/vc/hostfile", "--map-by", "ppr:1:node"),
        *("--mca", "pml", "ob1", "--mca", "btl", "tcp,self"),
        *("--mca", "btl_tcp_if_include", "10.0.0.0/21", "--mca", "oob_tcp_if_include"),
        *("10.0.0.0/21", "/usr/bin/py", "-m", "vc_metrics_agent.allreduce", "-b", "1M"),
        *("--nic", "eth1"),
    ]
    monkeypatch.setattr(agent_jobs.os, "geteuid", lambda: 0)
    monkeypatch.setattr(agent_jobs.pwd, "getpwnam", lambda name: name)
    assert agent_jobs.as_login_user(["mpirun", "-np", "2"])[:4] == ["runuser", "-u", "vc", "--"]

    def no_user(name):
        raise KeyError(name)

    monkeypatch.setattr(agent_jobs.pwd, "getpwnam", no_user)
    assert agent_jobs.as_login_user(["mpirun", "-np", "2"]) == [
        *("mpirun", "--allow-run-as-root", "-np", "2")
    ]


def test_a_soft_fabrics_few_mb_per_second_keep_their_precision():
    """What ib_write_bw prints in MB/s between two TCG guests: 5.12 MB/s is 0.04096 Gb/s, not
    0.04 (nor 0.0, which would leave the baseline nothing to hold a pair to)."""
    out = (
        " Device         : rxe0\n Link type       : Ethernet\n"
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
        " 1048576    40               5.21               5.12                 0.000005\n"
    )
    figures = toolparse.parse_ib_write_bw(out)
    assert figures["average_gbps"] == pytest.approx(0.04096) and figures["device"] == "rxe0"
    assert figures["peak_gbps"] == pytest.approx(0.04168)


def test_a_soft_fabrics_server_listens_again_after_a_failed_handshake(tmp_path, monkeypatch):
    """Seen between TCG guests: the client's first handshake fails (its peer not yet in the
    ARP cache), the server exits, and the client's retries found nobody listening."""
    root = soft_sysfs(tmp_path / "ib")
    answers = [
        {"stdout": " Failed to exchange data between server and clients\n", "exit_code": 1},
        {"stdout": " #bytes #iterations BW peak[MB/sec] BW average[MB/sec]\n", "exit_code": 0},
    ]
    monkeypatch.setattr(agent_jobs.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(
        agent_jobs, "run_tool", lambda tool, argv, timeout, **extra: {**answers.pop(0), **extra}
    )
    runner = agent_jobs.JobRunner(
        "http://portal/api/metrics/ingest", "t", infiniband_root=root, interfaces=lambda: INTERFACES
    )
    params = {"ports": 1, "base_port": 18515, "bytes": 1 << 16, "seconds": 8, "gid_index": None}
    soft = {**params, "device": "auto", "address": "10.0.0.20"}
    (out,) = runner.execute({"id": 1, "kind": "ib_server", "timeout": 180, "params": soft})
    assert out["exit_code"] == 0 and answers == []  # listened twice, the second run counts
