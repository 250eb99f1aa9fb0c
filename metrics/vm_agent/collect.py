"""What the agent reads on its VM each interval: host CPU, memory and network counters through
psutil, and the GPUs and fabric ports through ``devices`` (NVML and sysfs) or the stock
exporters, turned into one sample with per-second rates."""

import math
import time

import psutil

from . import devices
from .devices import INFINIBAND_ROOT

SKIP_INTERFACES = ("lo", "ib", "veth", "docker", "br-", "virbr", "cni", "flannel", "cali")
PORT_EXTRA = ("symbol_errors", "link_downed", "rcv_errors", "state", "rate_gbps")


def read_net_bytes():
    """(rx bytes, tx bytes) summed over the host's real interfaces."""
    rx = tx = 0
    for name, counters in psutil.net_io_counters(pernic=True).items():
        if not name.startswith(SKIP_INTERFACES):
            rx += counters.bytes_recv
            tx += counters.bytes_sent
    return rx, tx


def _rate(now_pair, before_pair, seconds):
    """Bytes/s between two (rx, tx) readings; None where a counter went back (reset)."""
    if now_pair is None or before_pair is None or seconds <= 0:
        return None, None
    return tuple(
        None if after is None or before is None or after < before else (after - before) / seconds
        for after, before in zip(now_pair, before_pair)
    )


def gpu_summary(gpus):
    """(mean utilisation %, memory used % over all GPUs) for the per-VM series, or
    (None, None) without GPUs."""
    utils = [g["util"] for g in gpus or () if g.get("util") is not None]
    used = sum(
        g["mem_used"] for g in gpus or () if g.get("mem_total") and g.get("mem_used") is not None
    )
    total = sum(
        g["mem_total"] for g in gpus or () if g.get("mem_total") and g.get("mem_used") is not None
    )
    return (sum(utils) / len(utils) if utils else None, 100.0 * used / total if total else None)


def port_rates(ports, before, seconds):
    """Port dicts as the portal takes them (rx/tx in bytes/s) from two readings of the
    cumulative counters, and the host's fabric (rx, tx) summed over them."""
    previous = {p["port"]: p for p in before or ()}
    out: list = []
    sums: list = [[], []]
    for port in ports or ():
        prior = previous.get(port["port"], {})
        pair = (port.get("rx_bytes"), port.get("tx_bytes"))
        rates = _rate(pair, (prior.get("rx_bytes"), prior.get("tx_bytes")), seconds)
        entry = {"port": port["port"], "rx": rates[0], "tx": rates[1]}
        entry.update({k: port.get(k) for k in PORT_EXTRA})
        out.append(entry)
        for total, counter, rate in zip(sums, pair, rates):
            if counter is not None:  # a port without counters is not part of the sum
                total.append(rate)
    # A port whose counter went back (an HCA reset) makes the sum unknown, not smaller.
    return out, tuple(sum(t) if t and None not in t else None for t in sums)


class Collector:
    """Takes samples: the host through psutil, GPUs and fabric ports through their sources
    (``read() -> list of dicts or None``: NVML and sysfs, or the exporters). Rates need two
    readings, so the counters are read once at start."""

    def __init__(
        self,
        infiniband_root=INFINIBAND_ROOT,
        nvml=None,
        clock=time.monotonic,
        gpus=None,
        ports=None,
    ):
        self.gpus = (
            gpus if gpus is not None else (devices.NvmlGpus(nvml) if nvml is not None else None)
        )
        self.ports = ports if ports is not None else devices.SysfsPorts(infiniband_root)
        self.clock = clock
        psutil.cpu_percent(interval=None)  # the first call only starts the measurement
        self.last = (clock(), read_net_bytes(), self.ports.read())

    def collect(self):
        """One sample as the portal wants it (fields of metrics.models.METRIC_FIELDS, and
        the ``gpus`` and ``ports`` arrays of metrics.models.devices)."""
        clock, net, ports = self.clock(), read_net_bytes(), self.ports.read()
        before_clock, before_net, before_ports = self.last
        self.last = (clock, net, ports)
        seconds = clock - before_clock
        net_rx, net_tx = _rate(net, before_net, seconds)
        port_entries, (fabric_rx, fabric_tx) = port_rates(ports, before_ports, seconds)
        gpus = self.gpus.read() if self.gpus is not None else None
        gpu_util, gpu_mem_util = gpu_summary(gpus)
        sample = {
            "ts": round(time.time(), 3),
            "cpu_util": psutil.cpu_percent(interval=None),
            "mem_util": psutil.virtual_memory().percent,
            "gpu_util": gpu_util,
            "gpu_mem_util": gpu_mem_util,
            "net_rx": net_rx or 0.0,
            "net_tx": net_tx or 0.0,
            "fabric_rx": fabric_rx,
            "fabric_tx": fabric_tx,
        }
        sample = {key: _clean(value) for key, value in sample.items()}
        sample["gpus"] = [_entry(gpu) for gpu in gpus or ()] or None
        sample["ports"] = [_entry(port) for port in port_entries] or None
        return sample


def _entry(device):
    """A device dict without its unmeasured fields (the portal takes absent as null)."""
    return {
        key: value if key in ("gpu", "port") else _clean(value)
        for key, value in device.items()
        if value is not None and (key in ("gpu", "port") or _clean(value) is not None)
    }


def _clean(value):
    """Rounded, and never NaN/inf (the portal refuses them; a bad reading becomes null)."""
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), 2)


# ---------------------------------------------------------------------------------------------
# Sending
