"""클러스터 검증 on the member VM: the agent's job runner.

It polls the portal for this VM's jobs with the agent's token (``POST …/api/metrics/jobs/next``;
the portal never connects to a VM), runs the real tools with timeouts (``subprocess``, an
argument list, never a shell) and posts their raw output with the figures parsed from it
(``toolparse``) to ``…/jobs/result``. Jobs handed out together run together
(an ``ib_write_bw`` server and client of one ring step must overlap), each on its own
thread. A tool that is missing or runs past its time is reported as such (exit 127 / 124);
the portal judges that, the agent never guesses a figure.

Standard library only, part of the agent's distribution (``metrics/vm_agent``). The NCCL
tests binary is ``$NCCL_TESTS_BIN`` (default ``all_reduce_perf``); multi-node all-reduces use
``mpirun`` with passwordless SSH between
the members, as any MPI job on the cluster does (as the login user ``vc`` when the agent runs
as root: the cluster's key is that user's).

On a soft fabric (a job whose ``device`` is ``auto``) the agent picks the RDMA device itself:
the one on the network interface that holds the member's fabric address (``address``), e.g.
Soft-RoCE's ``rxe0``, and the GID index of that address as RoCE v2 (the job's ``gid_index``
when the table does not list it). On members without GPUs the all-reduce is the agent's own
MPI benchmark (``allreduce``, a job whose ``runner`` is ``mpi``), one process per node over
``/etc/vc/hostfile``, its TCP traffic kept on the fabric's subnet.
"""

import fcntl
import importlib.util
import ipaddress
import json
import logging
import os
import pwd
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from . import VERSION, toolparse, transport

log = logging.getLogger("metrics.agent.jobs")
POLL_EVERY = 10.0  # the agent's sampling interval; the portal waits a minute for a fetch
# The ib_write_bw server of the same step may start later: its agent polls every 10 s, and a
# TCG guest on a loaded host takes seconds more to start the tool.
CONNECT_RETRY_SECONDS = 90.0
USER_AGENT = f"vc-metrics-agent/{VERSION} jobs"
TIMED_OUT, NOT_FOUND = 124, 127
HOSTFILE = "/etc/vc/hostfile"  # written by ``cluster`` from the portal's view of the cluster
LOGIN_USER = "vc"
SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B  # linux/sockios.h


def run_tool(tool, argv, timeout, env=None, **extra) -> dict:
    """One output entry: the command's stdout (its stderr appended when it failed)."""
    started = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S603 - an argument list from the job, never a shell
            argv,
            capture_output=True,
            text=True,
            timeout=max(timeout, 1),
            env={**os.environ, **(env or {})},
        )
        stdout, code = done.stdout, done.returncode
        if code:
            stdout += done.stderr[-4000:]
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        stdout = out.decode(errors="replace") if isinstance(out, bytes) else out
        stdout += f"\n[agent] {argv[0]} timed out after {timeout:.0f} s\n"
        code = TIMED_OUT
    except OSError as exc:
        stdout, code = f"[agent] {argv[0]}: {exc}\n", NOT_FOUND
    log.info("%s exited %d after %.1f s", argv[0], code, time.monotonic() - started)
    return {"tool": tool, "stdout": stdout, "exit_code": code, **extra}


def not_installed(tool, binary) -> dict:
    """The output of a job whose tool is not on this VM (a guest without GPU software)."""
    return {"tool": tool, "stdout": f"[agent] {binary}: not installed\n", "exit_code": NOT_FOUND}


def no_device(address) -> dict:
    """The output of an ``ib_write_bw`` job that found no RDMA device on the fabric."""
    text = f"[agent] no RDMA device on the interface holding {address}\n"
    return {"tool": "ib_write_bw", "stdout": text, "exit_code": 1}


def local_devices(root) -> list[str]:
    return sorted(p.name for p in Path(root).glob("*") if (p / "ports").is_dir())


def read_ports(root, devices) -> str:
    """The ``== dev/port ==`` readout ``toolparse.parse_port_status`` reads."""
    lines = []
    for device in devices:
        for port in sorted((Path(root) / device / "ports").glob("*")):
            lines.append(f"== {device}/{port.name} ==")
            for key, path in (
                ("state", "state"),
                ("rate", "rate"),
                ("symbol_error", "counters/symbol_error"),
                ("link_downed", "counters/link_downed"),
            ):
                try:
                    lines.append(f"{key}: {(port / path).read_text().strip()}")
                except OSError:
                    continue
    return "\n".join(lines) + "\n"


def _ib_argv(params, device, index, server=None):
    argv = [
        "ib_write_bw",
        "-d",
        device,
        "-p",
        str(params["base_port"] + index),
        "-s",
        str(params["bytes"]),
        "-D",
        str(params["seconds"]),
        "-F",
    ]
    if params.get("device") != "auto":
        # An HCA's hundreds of Gb/s read best in Gb/s; a soft fabric's few MB/s would print
        # as 0.00 or 0.01 there (two decimals): it reports in MB/s.
        argv.append("--report_gbits")
    if params.get("gid_index") is not None:
        argv += ["-x", str(params["gid_index"])]
    return argv + ([server] if server else [])


# ---------------------------------------------------------------------------------------------
# A soft fabric: the interface holding the fabric address, its RDMA device and GID


def _read(path) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def interface_addresses() -> dict:
    """{interface: (IPv4 address, netmask)} of this machine's interfaces (Linux ioctls)."""
    found = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _index, name in socket.if_nameindex():
            request = struct.pack("256s", name[:15].encode())
            try:
                address = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)[20:24]
                netmask = fcntl.ioctl(probe.fileno(), SIOCGIFNETMASK, request)[20:24]
            except OSError:  # no IPv4 address on it
                continue
            found[name] = (socket.inet_ntoa(address), socket.inet_ntoa(netmask))
    return found


def fabric_interface(address, interfaces) -> Optional[tuple]:
    """(name, subnet) of the interface in ``interfaces`` that holds ``address``."""
    for name, (held, netmask) in sorted(interfaces.items()):
        if held == address:
            return name, str(ipaddress.ip_interface(f"{held}/{netmask}").network)
    return None


def rdma_device_on(nic, root) -> Optional[str]:
    """The RDMA device whose port carries ``nic``: a RoCE port lists its netdev under
    ``gid_attrs/ndevs``; older kernels name a Soft-RoCE device's in ``parent``."""
    for device in sorted(Path(root).glob("*")):
        for ndev in sorted(device.glob("ports/*/gid_attrs/ndevs/*")):
            if _read(ndev) == nic:
                return device.name
        if _read(device / "parent") == nic:
            return device.name
    return None


def roce_v2_gid_index(root, device, address) -> Optional[int]:
    """The index of ``address`` (IPv4-mapped) as a RoCE v2 GID on the device's port 1."""
    wanted = ipaddress.IPv6Address(f"::ffff:{address}")
    port = Path(root) / device / "ports" / "1"
    indexes = sorted(int(p.name) for p in port.glob("gids/*") if p.name.isdigit())
    for index in indexes:
        try:
            gid = ipaddress.IPv6Address(_read(port / "gids" / str(index)))
        except ValueError:
            continue
        if gid == wanted and _read(port / "gid_attrs" / "types" / str(index)) == "RoCE v2":
            return index
    return None


def resolve_neighbour(address, seconds) -> None:
    """One ping to ``address``: its MAC in the ARP cache, and ours in its, before a soft RDMA
    queue pair needs them (Soft-RoCE fails the handshake when the neighbour is unresolved)."""
    ping = shutil.which("ping")
    argv = [ping] if ping else ["busybox", "ping"]
    try:
        subprocess.run(  # noqa: S603 - a fixed argument list, never a shell
            [*argv, "-c", "1", "-W", str(max(1, int(seconds))), address],
            capture_output=True,
            timeout=max(seconds, 1) + 1,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass


def as_login_user(argv) -> list:
    """``mpirun`` as the login user when the agent runs as root: its SSH key reaches the
    other members, and Open MPI refuses root."""
    if os.geteuid() != 0:
        return list(argv)
    try:
        pwd.getpwnam(LOGIN_USER)
    except KeyError:
        return [argv[0], "--allow-run-as-root", *argv[1:]]
    return ["runuser", "-u", LOGIN_USER, "--", *argv]


def mpi_allreduce_argv(params, network, python=sys.executable, hostfile=HOSTFILE) -> list:
    """``mpirun`` of the agent's all-reduce: one process per node of the hostfile, Open MPI's
    TCP transport (and its own wiring) on the fabric's ``network`` (name, subnet) if known."""
    argv = ["mpirun", "-np", str(params["nodes"]), "--hostfile", hostfile]
    argv += ["--map-by", "ppr:1:node", "--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
    if network is not None:
        argv += ["--mca", "btl_tcp_if_include", network[1], "--mca", "oob_tcp_if_include"]
        argv += [network[1]]
    argv += [python, "-m", "vc_metrics_agent.allreduce", *params["args"]]
    return argv + (["--nic", network[0]] if network is not None else [])


def _mpirun(params, nccl_bin):
    gpus, hosts = params["gpus"], params["hosts"]
    argv = [
        "mpirun",
        "-np",
        str(gpus * len(hosts)),
        "-H",
        ",".join(f"{host}:{gpus}" for host in hosts),
        "--bind-to",
        "none",
    ]
    for key, value in sorted(params.get("env", {}).items()):
        argv += ["-x", f"{key}={value}"]
    return argv + [nccl_bin, *params["args"], "-g", "1"]


class JobRunner:
    """Polls for and runs this VM's jobs."""

    def __init__(
        self,
        ingest_url,
        token,
        *,
        infiniband_root="/sys/class/infiniband",
        http_timeout=10.0,
        interfaces=interface_addresses,
    ):
        self.base = ingest_url.rsplit("/", 1)[0] + "/jobs"
        self.token = token
        self.infiniband_root = infiniband_root
        self.interfaces = interfaces
        self.http_timeout = http_timeout
        self.nccl_bin = os.environ.get("NCCL_TESTS_BIN", "all_reduce_perf")

    def _post(self, url, body):
        request = urllib.request.Request(  # noqa: S310 - the portal's URL from the operator
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
            },
        )
        with transport.urlopen(request, timeout=self.http_timeout) as response:
            return json.loads(response.read() or b"{}")

    def poll_once(self) -> list[threading.Thread]:
        """Fetch the jobs due now and start each; returns their threads."""
        threads = []
        for job in self._post(f"{self.base}/next", {}).get("jobs", []):
            thread = threading.Thread(
                target=self.run_and_post, args=(job,), daemon=True, name=f"job-{job['id']}"
            )
            thread.start()
            threads.append(thread)
        return threads

    def run_and_post(self, job) -> None:
        started = time.monotonic()
        outputs = self.execute(job)
        for out in outputs:
            try:
                out["figures"] = toolparse.parse(out["tool"], out["stdout"])
            except toolparse.ParseError as exc:
                log.warning("job %s: %s", job["id"], exc)
        body = {
            "job": job["id"],
            "outputs": outputs,
            "seconds": round(time.monotonic() - started, 1),
        }
        for attempt in range(3):
            try:
                self._post(f"{self.base}/result", body)
                return
            except urllib.error.HTTPError as exc:
                if exc.code < 500:  # refused for good (timed out meanwhile, malformed)
                    log.error("job %s refused (%d): %s", job["id"], exc.code, exc.read(500))
                    return
                log.warning("job %s: portal answered %d, retrying", job["id"], exc.code)
                time.sleep(2**attempt)
            except (urllib.error.URLError, OSError) as exc:
                log.warning("job %s: posting failed (%s), retrying", job["id"], exc)
                time.sleep(2**attempt)

    def execute(self, job) -> list[dict]:
        """The outputs of ``job``'s tools, run within its timeout."""
        kind, params = job["kind"], job["params"]
        deadline = time.monotonic() + job["timeout"]
        left = lambda: deadline - time.monotonic()  # noqa: E731
        if kind == "gpu":
            return [
                run_tool("nvidia-smi", ["nvidia-smi", "-L"], min(30, left())),
                run_tool("dcgmi", ["dcgmi", "diag", "-r", str(params["level"]), "--json"], left()),
            ]
        if params.get("runner") == "mpi":
            return [self._mpi_allreduce(params, left)]
        if kind.startswith("nccl") and shutil.which(self.nccl_bin) is None:
            return [not_installed("all_reduce_perf", self.nccl_bin)]
        if kind in ("nccl_pair", "nccl_all") and shutil.which("mpirun") is None:
            return [not_installed("all_reduce_perf", "mpirun")]
        if kind.startswith("ib") and shutil.which("ib_write_bw") is None:
            return [not_installed("ib_write_bw", "ib_write_bw")]
        if kind == "nccl_local":
            argv = [self.nccl_bin, *params["args"], "-g", str(params["gpus"])]
            return [run_tool("all_reduce_perf", argv, left(), env=params.get("env"))]
        if kind in ("nccl_pair", "nccl_all"):
            return [run_tool("all_reduce_perf", _mpirun(params, self.nccl_bin), left())]
        if params.get("device") == "auto":
            picked = self.soft_device(params["address"])
            if picked is None:
                return [no_device(params["address"])]
            devices, params = [picked[0]], {**params, "gid_index": picked[1]}
        else:
            devices = local_devices(self.infiniband_root)[: params["ports"]]
        if kind == "ib_server":
            return self._ib_servers(params, devices, left)
        before = read_ports(self.infiniband_root, devices)
        outputs = [{"tool": "ports", "stage": "before", "stdout": before, "exit_code": 0}]
        for index, device in enumerate(devices):
            outputs.append(self._ib_client(params, device, index, left))
        after = read_ports(self.infiniband_root, devices)
        return outputs + [{"tool": "ports", "stage": "after", "stdout": after, "exit_code": 0}]

    def soft_device(self, address) -> Optional[tuple]:
        """(device, GID index) of the soft fabric at ``address``, or None."""
        found = fabric_interface(address, self.interfaces())
        device = rdma_device_on(found[0], self.infiniband_root) if found else None
        if device is None:
            return None
        index = roce_v2_gid_index(self.infiniband_root, device, address)
        return device, index

    def _mpi_allreduce(self, params, left):
        if shutil.which("mpirun") is None:
            return not_installed("allreduce", "mpirun")
        if importlib.util.find_spec("mpi4py") is None:
            return not_installed("allreduce", "mpi4py")
        network = fabric_interface(params["address"], self.interfaces())
        return run_tool("allreduce", as_login_user(mpi_allreduce_argv(params, network)), left())

    def _ib_servers(self, params, devices, left):
        """One server per port at once (the client side tests them one by one)."""
        results = [None] * len(devices)

        soft = params.get("device") == "auto"
        began = time.monotonic()

        def serve(i, device):
            # On a soft fabric a client whose handshake failed (its peer not yet in the ARP
            # cache when it set up its queue pair) connects again: listen again for it.
            while True:
                out = run_tool("ib_write_bw", _ib_argv(params, device, i), left(), device=device)
                results[i] = out
                again = soft and out["exit_code"] not in (0, TIMED_OUT)
                if not again or time.monotonic() - began > CONNECT_RETRY_SECONDS or left() < 5:
                    return

        threads = [threading.Thread(target=serve, args=(i, d)) for i, d in enumerate(devices)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def _ib_client(self, params, device, index, left):
        give_up = time.monotonic() + CONNECT_RETRY_SECONDS
        while True:
            if params.get("device") == "auto":
                resolve_neighbour(params["server"], min(5, left()))
            out = run_tool(
                "ib_write_bw",
                _ib_argv(params, device, index, params["server"]),
                left(),
                device=device,
            )
            if out["exit_code"] == 0 or "connect" not in out["stdout"].lower():
                return out
            if time.monotonic() > give_up or left() < 5:
                return out
            time.sleep(1)

    def loop(self, stopping: threading.Event, every: float = POLL_EVERY) -> None:
        while not stopping.wait(every):
            try:
                self.poll_once()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log.debug("job poll failed: %s", exc)


def start(ingest_url, token, stopping, **options) -> threading.Thread:
    """The agent's hook: poll for jobs on a daemon thread until ``stopping`` is set."""
    runner = JobRunner(ingest_url, token, **options)
    thread = threading.Thread(target=runner.loop, args=(stopping,), daemon=True, name="jobs")
    thread.start()
    return thread
