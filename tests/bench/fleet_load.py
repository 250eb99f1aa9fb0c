"""bench_ingest_fleet's agents: an open-loop load of agent-sized POSTs at a set rate.

Run as a process of its own (``python -m tests.bench.fleet_load``, no Django), so that its
CPU and its GIL are not the bench's: it reads ``{"host", "port", "tokens", "rate",
"seconds", "connections", "devices"}`` as JSON on stdin, sends request *i* at ``start + i /
rate`` round robin over the tokens (each token one VM's agent: with 8,000 tokens at 800/s,
every 10 s), and prints one JSON line: the latencies in ms, the failures, its own CPU
seconds and peak RSS.

Open loop: a request's latency counts from the instant it was due, not from when a
connection was free to send it, so once the server falls behind the queue shows in the
latencies instead of silently lowering the offered rate (coordinated omission).
"""

import json
import resource
import sys
import threading
import time
from http.client import HTTPConnection

import orjson

# What the agent sends (``metrics.vm_agent.main.FIELDS``), written out: this process does
# not import the portal.
FIELDS = [
    "ts", "cpu_util", "mem_util", "gpu_util", "gpu_mem_util", "net_rx", "net_tx",
    "fabric_rx", "fabric_tx", "gpus", "ports",
]  # fmt: skip
# Not the agent's ``vc-metrics-agent/<version>``: a web process writes a token's version at
# its first request and never again while it stays (``metrics.agent_versions``), the steady
# state of a fleet, which a few seconds of load over thousands of tokens would not reach.
USER_AGENT = "bench-fleet-load"


def body(ts: float, gpus: list, ports: list) -> bytes:
    row = [ts, 31.25, 42.5, 96.5, 78.25, 55012345.5, 6012345.5, 20123456789.5, 21123456789.5]
    return orjson.dumps({"fields": FIELDS, "rows": [[*row, gpus, ports]]})


def peak_mib() -> float:
    """This process's peak RSS (VmHWM: getrusage's maximum carries the parent's across
    exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(config: dict) -> dict:
    tokens, rate, seconds = config["tokens"], config["rate"], config["seconds"]
    gpus, ports = config["devices"]
    total = int(rate * seconds)
    start = time.monotonic() + 0.2
    latencies: list[float] = [0.0] * total
    failures: list[str] = []
    lock = threading.Lock()
    cursor = [0]

    def connection():
        while True:
            with lock:
                index = cursor[0]
                cursor[0] += 1
            if index >= total:
                return
            yield index

    def client():
        conn = HTTPConnection(config["host"], config["port"], timeout=60)
        for index in connection():
            due = start + index / rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            token = tokens[index % len(tokens)]
            headers = {
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
            }
            try:
                conn.request("POST", "/api/metrics/ingest", body(time.time(), gpus, ports), headers)
                response = conn.getresponse()
                answer = response.read()
            except OSError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                conn.close()
                conn = HTTPConnection(config["host"], config["port"], timeout=60)
                latencies[index] = -1.0
                continue
            latencies[index] = (time.monotonic() - due) * 1000
            if response.status != 200:
                failures.append(f"{response.status} {answer[:200]!r}")
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(config["connections"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "latencies": latencies,
        "failures": failures[:5],
        "failed": len(failures),
        "elapsed": elapsed,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": peak_mib(),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(run(json.loads(sys.stdin.read()))) + "\n")
