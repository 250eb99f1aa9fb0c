"""The stock exporters as the agent's source: NVIDIA's dcgm-exporter (:9400) for
the GPUs and node_exporter (:9100, InfiniBand collector) for the fabric ports, scraped over
HTTP and parsed with ``prometheus_client``'s text parser, then mapped onto the same GPU and
port dicts as ``devices`` reads from NVML and sysfs.

Names (dcgm-exporter's default counters and node_exporter's infiniband
collector): ``DCGM_FI_DEV_XID_ERRORS`` is a gauge of the *last* XID, not a count; node_exporter
already converts the kernel's 4-byte words into bytes.
"""

import logging
import urllib.error
import urllib.request
from typing import Optional

from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger("metrics.agent")

DCGM_URL = "http://127.0.0.1:9400/metrics"
NODE_URL = "http://127.0.0.1:9100/metrics"
# dcgm-exporter sample name -> GPU field (memory already in MiB, power in W).
DCGM_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_FB_USED": "mem_used",
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "throttle",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_uncorrected",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_corrected",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "remapped_rows",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}
# Summed into one field.
DCGM_SUMS = {
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_FB_USED": "mem_total",
    "DCGM_FI_DEV_FB_FREE": "mem_total",
    "DCGM_FI_DEV_FB_RESERVED": "mem_total",
}
# node_exporter sample name (without ``_total``) -> port field
NODE_FIELDS = {
    "node_infiniband_port_data_received_bytes": "rx_bytes",
    "node_infiniband_port_data_transmitted_bytes": "tx_bytes",
    "node_infiniband_symbol_error": "symbol_errors",
    "node_infiniband_link_downed": "link_downed",
    "node_infiniband_port_errors_received": "rcv_errors",
    "node_infiniband_state_id": "state",
    "node_infiniband_rate_bytes_per_second": "rate_gbps",
}
GPU_KEYS = (
    "util",
    "mem_used",
    "mem_total",
    "temp",
    "power",
    "sm_clock",
    "throttle",
    "ecc_uncorrected",
    "ecc_corrected",
    "remapped_rows",
    "nvlink_errors",
    "xid",
)
PORT_KEYS = (
    "rx_bytes",
    "tx_bytes",
    "symbol_errors",
    "link_downed",
    "rcv_errors",
    "state",
    "rate_gbps",
)


def _samples(text):
    """(name, labels, value) of every sample; the parser spells a counter's samples with
    ``_total`` whether or not the exporter did, so names are compared without it."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name.removesuffix("_total"), sample.labels, sample.value


def parse_dcgm(text: str) -> list:
    """GPU dicts (``gpu`` from the ``gpu`` label) from dcgm-exporter's exposition text.

    In MIG mode dcgm-exporter adds rows per GPU instance (``GPU_I_ID``) under the card's
    ``gpu`` label, and some versions give the card's fields on instance rows only. The card's
    own rows are used whenever it has any (an instance's memory added to them would count it
    twice); otherwise its first instance's, with the instances' memory added up (together
    they hold the card's)."""
    cards: dict = {}
    instances: dict = {}
    for name, labels, value in _samples(text):
        if name not in DCGM_FIELDS and name not in DCGM_SUMS or "gpu" not in labels:
            continue
        try:
            index = int(labels["gpu"])
        except ValueError:
            continue
        instance = labels.get("GPU_I_ID") or ""
        if instance:
            _add(instances.setdefault(index, {}).setdefault(instance, {}), name, value)
        else:
            _add(cards.setdefault(index, {}), name, value)
    gpus = {
        index: cards.get(index) or _from_instances(instances[index])
        for index in set(cards) | set(instances)
    }
    # Dense indexes as NVML gives them; fields dcgm-exporter does not export stay None.
    return [{"gpu": i, **{k: gpus[i].get(k) for k in GPU_KEYS}} for i in sorted(gpus)]


def _add(gpu: dict, name: str, value: float) -> None:
    if name in DCGM_FIELDS:
        gpu[DCGM_FIELDS[name]] = value
    if name in DCGM_SUMS:
        field = DCGM_SUMS[name]
        gpu[field] = (gpu.get(field) or 0.0) + value


def _from_instances(by_instance: dict) -> dict:
    """A card known only from its MIG instances' rows: the first instance's figures (clock,
    temperature, power are the card's on every one), the memory of all of them."""
    order = sorted(by_instance, key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0, i))
    rows = [by_instance[i] for i in order]
    gpu = dict(rows[0])
    for field in ("mem_used", "mem_total"):
        values = [row[field] for row in rows if row.get(field) is not None]
        gpu[field] = sum(values) if values else None
    return gpu


def parse_node(text: str) -> list:
    """Port dicts from node_exporter's exposition text, indexed like ``devices``
    indexes the sysfs ports: by (device, port number)."""
    ports: dict = {}
    for name, labels, value in _samples(text):
        field = NODE_FIELDS.get(name)
        if field is None or "device" not in labels or "port" not in labels:
            continue
        number = labels["port"]
        key = (labels["device"], int(number) if number.isdigit() else 0)
        ports.setdefault(key, {})[field] = value * 8 / 1e9 if field == "rate_gbps" else value
    return [
        {"port": index, **{k: ports[key].get(k) for k in PORT_KEYS}}
        for index, key in enumerate(sorted(ports))
    ]


def scrape(url: str, timeout: float = 3.0) -> Optional[str]:
    """An exporter's /metrics text, or None (logged) when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the operator's exporter URL
            return response.read(8 * 1024 * 1024).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.warning("cannot scrape %s: %s", url, getattr(exc, "reason", exc))
        return None


class _Exporter:
    """Devices read from an exporter's /metrics by ``parser``: ``read()`` gives them, or None
    when the exporter does not answer or answers something else."""

    def __init__(self, url, parser):
        self.url = url
        self.parser = parser

    def read(self):
        text = scrape(self.url)
        return None if text is None else _parsed(self.parser, text, self.url)


class ExporterGpus(_Exporter):
    """GPUs from dcgm-exporter: the same interface as ``devices.NvmlGpus``."""

    def __init__(self, url=DCGM_URL):
        super().__init__(url, parse_dcgm)


class ExporterPorts(_Exporter):
    """Fabric ports from node_exporter: the same interface as ``SysfsPorts``."""

    def __init__(self, url=NODE_URL):
        super().__init__(url, parse_node)


def _parsed(parser, text, url):
    try:
        return parser(text)
    except ValueError as exc:  # not the exposition format (a proxy's error page)
        log.warning("cannot parse %s: %s", url, exc)
        return None
