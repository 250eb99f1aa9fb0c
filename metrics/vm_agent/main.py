"""The metrics agent: runs on a member VM and reports its usage to the portal.

    vc-metrics-agent --url https://portal/api/metrics/ingest --token vcm_… \
        [--interval 10] [--source auto|nvml|exporters]

Installed with pip as the ``vc-metrics-agent`` distribution (``metrics/vm_agent``): standard
library plus ``psutil``; ``nvidia-ml-py`` where there are GPUs (extra ``nvml``),
``prometheus-client`` to read the stock exporters (extra ``exporters``). URL and token may
come from ``METRICS_AGENT_URL`` / ``METRICS_AGENT_TOKEN`` (a guest's NoCloud seed writes them
to ``/etc/vc-metrics.env``). Every interval it takes one sample:

- CPU and memory utilisation (psutil);
- network rx/tx in bytes/s, summed over the host's interfaces except loopback, InfiniBand
  (IPoIB is counted as fabric) and container/bridge plumbing (counted on the real NIC);
- per GPU (``gpus``): utilisation, memory, temperature, power, SM clock, throttle reasons,
  ECC and NVLink error counters, remapped rows, last XID — through NVML (``devices``)
  or scraped from dcgm-exporter (``exporters``); the per-VM ``gpu_util`` /
  ``gpu_mem_util`` are their mean and total; without a GPU the fields are null, never zero;
- per fabric port (``ports``): rx/tx bytes/s from ``/sys/class/infiniband/*/ports/*/counters``
  (``port_rcv_data``/``port_xmit_data`` count 4-byte words), symbol errors, link downed,
  receive errors, state and link rate — or from node_exporter's InfiniBand collector; the
  per-VM ``fabric_rx`` / ``fabric_tx`` are their sums.

Samples go into a bounded buffer (oldest dropped first when full) and are posted in batches
of up to 1,000 (compact form, gzipped when large). A failed post (portal down, 5xx, 429, bad
token) is retried with exponential backoff and jitter while sampling continues; a batch the
portal refuses as invalid (400) or already stored (409) is dropped so it cannot block the
rest. A missing or failing device yields null fields, never a crash. Beside sampling it runs
this VM's 클러스터 검증 jobs (``jobs``) and keeps its cluster's files — peers in
``/etc/hosts``, the hostfile, ``/etc/vc/cluster.env``, SSH between members (``cluster``;
``--no-cluster-files`` leaves them alone, for an agent run without root). The token may come
from ``METRICS_AGENT_TOKEN`` instead of the command line (keeps it out of ``ps``), and goes
only to that URL: a redirect is logged and never followed (``transport``)."""

import argparse
import gzip
import http.client
import json
import logging
import os
import random
import signal
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from itertools import islice
from types import ModuleType
from typing import Optional

from . import VERSION, cluster, devices, jobs, transport
from .collect import Collector

log = logging.getLogger("metrics.agent")

DEFAULT_INTERVAL = 10.0
DEFAULT_BUFFER = 8640  # one day at 10 s; ~2 MB
MAX_BATCH = 1000  # the portal's METRICS_MAX_BATCH_SAMPLES
INFINIBAND_ROOT = devices.INFINIBAND_ROOT
SOURCES = ("auto", "nvml", "exporters")
# Interfaces whose traffic is counted elsewhere or twice.
BACKOFF_BASE = 2.0
BACKOFF_MAX = 300.0
# The portal keeps the version per VM (metrics.agent_versions) and shows it on the VM page.
USER_AGENT = f"vc-metrics-agent/{VERSION}"
GZIP_ABOVE = 8192  # bytes of JSON
FIELDS = (
    "ts",
    "cpu_util",
    "mem_util",
    "gpu_util",
    "gpu_mem_util",
    "net_rx",
    "net_tx",
    "fabric_rx",
    "fabric_tx",
    "gpus",
    "ports",
)
FIELDS_JSON = json.dumps(FIELDS)


# ---------------------------------------------------------------------------------------------
# Reading the host


OK, DROP, SPLIT, RETRY = "ok", "drop", "split", "retry"


class Agent:
    def __init__(
        self,
        url,
        token,
        *,
        interval=DEFAULT_INTERVAL,
        buffer_size=DEFAULT_BUFFER,
        batch_size=MAX_BATCH,
        timeout=10.0,
        collector=None,
    ):
        self.url = url
        self.token = token
        self.interval = interval
        self.batch_size = batch_size
        self.timeout = timeout
        self.collector = collector or Collector()
        self.buffer: deque = deque(maxlen=buffer_size)
        self.dropped = 0
        self.stored = 0
        self.failures = 0
        self.next_send = 0.0
        self.stopping = threading.Event()

    def tick(self):
        """Take a sample, buffer it, send what is due; returns the sample."""
        sample = self.collector.collect()
        self.add(sample)
        if time.monotonic() >= self.next_send:
            self.flush()
        return sample

    def add(self, sample):
        """Buffer one sample as its row of JSON in ``FIELDS`` order: with 8 GPUs and 4 ports
        about 2 KB, a day's buffer ~20 MB, and nothing to encode again when it is sent."""
        if sample["cpu_util"] is None or sample["mem_util"] is None:
            log.warning("unreadable CPU/memory figures; sample skipped")
            return
        if len(self.buffer) == self.buffer.maxlen:
            self.dropped += 1
            if self.dropped % 100 == 1:
                log.warning(
                    "buffer full (%d samples): dropped %d oldest so far",
                    self.buffer.maxlen,
                    self.dropped,
                )
        row = [sample.get(field) for field in FIELDS]
        self.buffer.append(json.dumps(row, allow_nan=False, separators=(",", ":")))

    def flush(self):
        """Post the buffer oldest first; on a retryable failure keep it and back off."""
        while self.buffer:
            batch = list(islice(self.buffer, 0, self.batch_size))
            outcome, retry_after = self.post(batch)
            if outcome == SPLIT:
                self.batch_size = max(1, len(batch) // 2)
                continue
            if outcome == RETRY:
                self.failures += 1
                delay = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (self.failures - 1))
                delay = max(delay * random.uniform(0.5, 1.0), retry_after or 0)  # noqa: S311 - a retry's jitter, never a secret
                self.next_send = time.monotonic() + delay
                log.info("will retry in %.0f s (%d samples buffered)", delay, len(self.buffer))
                return False
            for _sample in batch:
                self.buffer.popleft()
            if outcome == OK:
                self.stored += len(batch)
        self.failures = 0
        self.next_send = 0.0
        return True

    def post(self, batch):
        """(outcome, Retry-After seconds or None) of one POST."""
        # The portal's compact form: field names once, then one array per sample.
        body = f'{{"fields":{FIELDS_JSON},"rows":[{",".join(batch)}]}}'.encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }
        if len(body) > GZIP_ABOVE:  # a backlog flush: a third of the bytes to send and parse
            body = gzip.compress(body, compresslevel=5, mtime=0)
            headers["Content-Encoding"] = "gzip"
        request = urllib.request.Request(self.url, data=body, method="POST", headers=headers)  # noqa: S310 - the operator's METRICS_AGENT_URL
        try:
            with transport.urlopen(request, timeout=self.timeout) as response:
                response.read()
            return OK, None
        except urllib.error.HTTPError as exc:
            status = exc.code
            if 300 <= status < 400:  # logged by transport, never followed: kept, retried
                return RETRY, None
            detail = exc.read(2000).decode("utf-8", "replace")
            if status == 413 and len(batch) > 1:
                return SPLIT, None
            if status in (400, 409, 413):
                log.error("portal refused %d samples (%d): %s; dropped", len(batch), status, detail)
                return DROP, None
            if status in (401, 403):
                log.error("portal refused the token (%d): %s", status, detail)
            else:
                log.warning("portal answered %d: %s", status, detail)
            retry_after = exc.headers.get("Retry-After", "")
            return RETRY, float(retry_after) if retry_after.isdigit() else None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            log.warning("portal unreachable: %s", getattr(exc, "reason", exc))
            return RETRY, None

    def run(self, ticks=None):
        """Sample every ``interval`` seconds until stopped (or ``ticks`` samples), then try a
        last flush. A slow post delays the next sample instead of piling them up."""
        deadline = time.monotonic()
        count = 0
        while not self.stopping.is_set() and (ticks is None or count < ticks):
            self.tick()
            count += 1
            deadline += self.interval
            delay = deadline - time.monotonic()
            if delay < 0:
                deadline, delay = time.monotonic(), 0
            if ticks is None or count < ticks:
                self.stopping.wait(delay)
        if self.buffer:
            self.flush()
        return count

    def stop(self, *_args):
        self.stopping.set()


def check(url, token, timeout=10.0):
    """Ask the portal which VM ``token`` writes for (nothing stored); returns the VM id."""
    check_url = url.rsplit("/", 1)[0] + "/check"
    request = urllib.request.Request(  # noqa: S310 - the operator's METRICS_AGENT_URL
        check_url,
        data=b"",
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "User-Agent": USER_AGENT,
        },
    )
    with transport.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())["vm"]


def make_collector(source, infiniband_root=INFINIBAND_ROOT, dcgm_url=None, node_url=None):
    """The collector for ``--source``: where GPU and port figures come from. Without
    prometheus-client (the ``[exporters]`` extra) ``auto`` reads NVML and sysfs only."""
    exporters: Optional[ModuleType] = None
    if source != "nvml":
        try:
            from . import exporters
        except ImportError:
            if source == "exporters":
                raise
            log.info("prometheus-client is not installed: the exporters are not read")
    if exporters is None:
        nvml = devices.open_nvml()
        return Collector(infiniband_root, gpus=nvml and devices.NvmlGpus(nvml))
    exporter_gpus = exporters.ExporterGpus(dcgm_url or exporters.DCGM_URL)
    exporter_ports = exporters.ExporterPorts(node_url or exporters.NODE_URL)
    if source == "exporters":
        return Collector(infiniband_root, gpus=exporter_gpus, ports=exporter_ports)
    nvml = devices.open_nvml()
    gpus = (
        devices.NvmlGpus(nvml)
        if nvml
        else (exporter_gpus if exporter_gpus.read() is not None else None)
    )
    sysfs = devices.SysfsPorts(infiniband_root)
    ports = sysfs if sysfs.read() or exporter_ports.read() is None else exporter_ports
    log.info(
        "sources: GPUs %s, ports %s", type(gpus).__name__ if gpus else "none", type(ports).__name__
    )
    return Collector(infiniband_root, gpus=gpus, ports=ports)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="vc-metrics-agent", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("METRICS_AGENT_URL"),
        help="the portal's /api/metrics/ingest URL (or METRICS_AGENT_URL)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("METRICS_AGENT_TOKEN"),
        help="this VM's metrics token (or METRICS_AGENT_TOKEN)",
    )
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds")
    parser.add_argument(
        "--buffer",
        type=int,
        default=DEFAULT_BUFFER,
        help="samples kept while the portal is unreachable",
    )
    parser.add_argument("--batch", type=int, default=MAX_BATCH, help="samples per POST")
    parser.add_argument("--infiniband-root", default=INFINIBAND_ROOT)
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="auto",
        help="GPUs and fabric ports: nvml (NVML and sysfs), exporters "
        "(dcgm-exporter and node_exporter), auto (NVML/sysfs where "
        "present, else an exporter that answers)",
    )
    parser.add_argument("--dcgm-url", default="http://127.0.0.1:9400/metrics")
    parser.add_argument("--node-exporter-url", default="http://127.0.0.1:9100/metrics")
    parser.add_argument(
        "--no-cluster-files",
        dest="cluster_files",
        action="store_false",
        help="do not write the cluster's files (/etc/hosts, /etc/vc, the login user's SSH "
        "files) nor report the host keys",
    )
    parser.add_argument(
        "--files-root", default="/", help="where the cluster's files go (tests: a temp dir)"
    )
    parser.add_argument("--check", action="store_true", help="verify URL and token, then exit")
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    if not args.url or not args.token:
        parser.error(
            "--url (or METRICS_AGENT_URL) and --token (or METRICS_AGENT_TOKEN) are required"
        )
    if args.interval <= 0 or args.buffer <= 0 or not 0 < args.batch <= MAX_BATCH:
        parser.error("--interval and --buffer must be positive, --batch 1..1000")
    if args.check:
        try:
            print(f"ok: this token writes the metrics of VM {check(args.url, args.token)}")
        except (
            urllib.error.URLError,
            http.client.HTTPException,
            OSError,
            ValueError,
            KeyError,
        ) as exc:
            print(f"failed: {exc}")
            return 1
        return 0
    agent = Agent(
        args.url,
        args.token,
        interval=args.interval,
        buffer_size=args.buffer,
        batch_size=args.batch,
        collector=make_collector(
            args.source, args.infiniband_root, args.dcgm_url, args.node_exporter_url
        ),
    )
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    jobs.start(
        args.url,
        args.token,
        agent.stopping,  # 클러스터 검증 jobs
        infiniband_root=args.infiniband_root,
    )
    if args.cluster_files:  # members know each other: hosts, hostfile, SSH between them
        cluster.start(args.url, args.token, agent.stopping, cluster.ClusterFiles(args.files_root))
    log.info("reporting to %s every %g s", args.url, args.interval)
    agent.run()
    log.info(
        "stopped: %d samples stored, %d buffered, %d dropped",
        agent.stored,
        len(agent.buffer),
        agent.dropped,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
