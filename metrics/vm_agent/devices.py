"""What the agent reads per device on the VM itself: each GPU through NVML, each fabric port
from sysfs. Part of the agent's distribution; standard library plus the
optional ``nvidia-ml-py``.

A GPU is a dict of ``metrics.models.devices.GPU_FIELDS`` (memory in MiB, power in W, as
dcgm-exporter reports them too); a field the driver does not support is left out, never zero.
A port is a dict of cumulative counters (bytes already converted from the kernel's 4-byte
words), its state and link rate; ``Collector`` turns the byte counters into rates.
"""

import logging
import re
from pathlib import Path
from typing import Optional

log = logging.getLogger("metrics.agent")

INFINIBAND_ROOT = "/sys/class/infiniband"
IB_WORD_BYTES = 4  # port_rcv_data / port_xmit_data count 4-byte words
MIB = 1024 * 1024
# sysfs counter file -> port field
PORT_COUNTERS = {
    "symbol_error": "symbol_errors",
    "link_downed": "link_downed",
    "port_rcv_errors": "rcv_errors",
}
_RATE = re.compile(r"^\s*([0-9.]+)\s*Gb/sec")  # "400 Gb/sec (4X NDR)"
_STATE = re.compile(r"^\s*(\d+)")  # "4: ACTIVE"


# ---------------------------------------------------------------------------------------------
# Fabric ports (sysfs)


def port_paths(root=INFINIBAND_ROOT) -> list:
    """The port directories (``<hca>/ports/<n>``) in a stable order: the port index sent to
    the portal is the position in this list (mlx5_0/1 is 0, mlx5_1/1 is 1, …)."""

    def key(path):
        number = path.name
        return (path.parent.parent.name, int(number) if number.isdigit() else 0)

    return sorted((p for p in Path(root).glob("*/ports/*") if p.is_dir()), key=key)


def parse_rate(text: str) -> Optional[float]:
    """Gb/s from a sysfs ``rate`` file ("400 Gb/sec (4X NDR)"), None if unreadable."""
    match = _RATE.match(text)
    return float(match.group(1)) if match else None


def parse_state(text: str) -> Optional[int]:
    """The numeric state of a sysfs ``state`` file ("4: ACTIVE")."""
    match = _STATE.match(text)
    return int(match.group(1)) if match else None


def _read(path):
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _counter(path):
    text = _read(path)
    return int(text) if text is not None and text.isdigit() else None


def read_ports(root=INFINIBAND_ROOT) -> list:
    """[{port, rx_bytes, tx_bytes, symbol_errors, link_downed, rcv_errors, state,
    rate_gbps}] for every port; counters a port lacks are None."""
    ports = []
    for index, path in enumerate(port_paths(root)):
        counters = path / "counters"
        rx, tx = _counter(counters / "port_rcv_data"), _counter(counters / "port_xmit_data")
        port = {
            "port": index,
            "rx_bytes": None if rx is None else rx * IB_WORD_BYTES,
            "tx_bytes": None if tx is None else tx * IB_WORD_BYTES,
        }
        for file_name, field in PORT_COUNTERS.items():
            port[field] = _counter(counters / file_name)
        state, rate = _read(path / "state"), _read(path / "rate")
        port["state"] = None if state is None else parse_state(state)
        port["rate_gbps"] = None if rate is None else parse_rate(rate)
        ports.append(port)
    return ports


class SysfsPorts:
    """The ports under ``root``: the same interface as ``exporters.ExporterPorts``."""

    def __init__(self, root=INFINIBAND_ROOT):
        self.root = root

    def read(self):
        return read_ports(self.root) or None


# ---------------------------------------------------------------------------------------------
# GPUs (NVML)


def open_nvml():
    """The ``pynvml`` module, initialised, or None when there is no usable NVIDIA GPU."""
    try:
        import pynvml
    except ImportError:
        log.info("nvidia-ml-py is not installed: GPU metrics are skipped")
        return None
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        log.info("NVML unavailable (%s): GPU metrics are skipped", exc)
        return None
    if not count:
        return None
    log.info("NVML: %d GPU(s)", count)
    return pynvml


class NvmlGpus:
    """Reads every GPU through NVML. XIDs arrive as NVML events, not as a value to read: a
    non-blocking wait on an event set each sample keeps the last XID per GPU, which is what
    dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` holds too."""

    def __init__(self, nvml):
        self.nvml = nvml
        self.last_xid = {}
        self.events = None
        try:
            self.events = nvml.nvmlEventSetCreate()
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                nvml.nvmlDeviceRegisterEvents(
                    handle, nvml.nvmlEventTypeXidCriticalError, self.events
                )
        except nvml.NVMLError as exc:  # not supported in a VM without the right driver
            log.info("NVML XID events unavailable (%s)", exc)
            self.events = None

    def _drain_xids(self):
        nvml = self.nvml
        while self.events is not None:
            try:
                event = nvml.nvmlEventSetWait(self.events, 0)
                # By index: NVML handles are ctypes pointers, equal only to themselves.
                self.last_xid[nvml.nvmlDeviceGetIndex(event.device)] = int(event.eventData)
            except nvml.NVMLError:  # timeout: no event pending
                return

    def read(self):
        """A list of GPU dicts, or None when NVML fails as a whole (a driver reload)."""
        nvml = self.nvml
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError as exc:
            log.warning("NVML read failed: %s", exc)
            return None
        self._drain_xids()
        return [self._gpu(index, handle) for index, handle in enumerate(handles)]

    def _gpu(self, index, handle):
        nvml = self.nvml
        gpu = {"gpu": index}
        readers = {
            "util": lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
            "temp": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # mW
            "sm_clock": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "throttle": lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
            "ecc_uncorrected": lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "ecc_corrected": lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "remapped_rows": lambda: nvml.nvmlDeviceGetRemappedRows(handle)[1],  # uncorrectable
            "nvlink_errors": lambda: self._nvlink_errors(handle),
        }
        for field, reader in readers.items():
            try:
                gpu[field] = reader()
            except nvml.NVMLError:  # not supported on this GPU or driver: not measured
                gpu[field] = None
        try:
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            gpu["mem_used"], gpu["mem_total"] = memory.used / MIB, memory.total / MIB
        except nvml.NVMLError:
            gpu["mem_used"] = gpu["mem_total"] = None
        gpu["xid"] = self.last_xid.get(index, 0 if self.events is not None else None)
        return gpu

    def _nvlink_errors(self, handle):
        nvml = self.nvml
        counters = [
            getattr(nvml, name)
            for name in (
                "NVML_NVLINK_ERROR_DL_CRC_FLIT",
                "NVML_NVLINK_ERROR_DL_CRC_DATA",
                "NVML_NVLINK_ERROR_DL_REPLAY",
                "NVML_NVLINK_ERROR_DL_RECOVERY",
            )
        ]
        total, found = 0, False
        for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
            for counter in counters:
                try:
                    total += nvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, counter)
                    found = True
                except nvml.NVMLError:  # link absent or counter unsupported
                    continue
        return total if found else None
