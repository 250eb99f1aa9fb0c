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
the members, as any MPI job on the cluster does.
"""

import json
import logging
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import VERSION, toolparse, transport

log = logging.getLogger("metrics.agent.jobs")
POLL_EVERY = 10.0  # the agent's sampling interval; the portal waits a minute for a fetch
CONNECT_RETRY_SECONDS = 30.0  # the ib_write_bw server of the same step may start later
USER_AGENT = f"vc-metrics-agent/{VERSION} jobs"
TIMED_OUT, NOT_FOUND = 124, 127


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
        "--report_gbits",
    ]
    if params.get("gid_index") is not None:
        argv += ["-x", str(params["gid_index"])]
    return argv + ([server] if server else [])


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
        self, ingest_url, token, *, infiniband_root="/sys/class/infiniband", http_timeout=10.0
    ):
        self.base = ingest_url.rsplit("/", 1)[0] + "/jobs"
        self.token = token
        self.infiniband_root = infiniband_root
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
        devices = local_devices(self.infiniband_root)[: params["ports"]]
        if kind == "ib_server":
            return self._ib_servers(params, devices, left)
        before = read_ports(self.infiniband_root, devices)
        outputs = [{"tool": "ports", "stage": "before", "stdout": before, "exit_code": 0}]
        for index, device in enumerate(devices):
            outputs.append(self._ib_client(params, device, index, left))
        after = read_ports(self.infiniband_root, devices)
        return outputs + [{"tool": "ports", "stage": "after", "stdout": after, "exit_code": 0}]

    def _ib_servers(self, params, devices, left):
        """One server per port at once (the client side tests them one by one)."""
        results = [None] * len(devices)

        def serve(i, device):
            results[i] = run_tool("ib_write_bw", _ib_argv(params, device, i), left(), device=device)

        threads = [threading.Thread(target=serve, args=(i, d)) for i, d in enumerate(devices)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def _ib_client(self, params, device, index, left):
        give_up = time.monotonic() + CONNECT_RETRY_SECONDS
        while True:
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
