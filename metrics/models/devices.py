"""Per-GPU and per-fabric-port series: one row per device per sample, beside the
per-VM ``Sample``, so that one slow GPU of eight is not diluted into its node's average.

Each series is described once (``Series``): its raw model, its minute and hour rollups, the
columns that name a device and the field table the ingest validates, storage writes and
rollups compute from. The rollup models are built from the same field tables, so a field
added here is validated, stored and rolled up without another list to keep in step.

Every device field is nullable (a driver that lacks a counter reports none, never zero) and
stored as float8 like the host series: the counters the agents read fit well inside float8's
exact integers (2**53).
"""

from dataclasses import dataclass

from django.db import models

from metrics.models.samples import PERCENT, RATE, series_model

COUNT = (0.0, 2.0**53)  # a cumulative counter
MIB = (0.0, 2.0**40)  # GPU memory in MiB (dcgm-exporter's unit for FB_USED)

# (name, nullable, lowest, highest)
GPU_FIELDS = (
    ("util", True, *PERCENT),
    ("mem_used", True, *MIB),
    ("mem_total", True, *MIB),
    ("temp", True, -40.0, 200.0),  # degrees C
    ("power", True, 0.0, 10000.0),  # W
    ("sm_clock", True, 0.0, 10000.0),  # MHz
    ("throttle", True, *COUNT),  # NVML clocks-throttle-reasons bitmask
    ("ecc_uncorrected", True, *COUNT),  # volatile, double-bit
    ("ecc_corrected", True, *COUNT),  # volatile, single-bit
    ("remapped_rows", True, *COUNT),  # rows remapped for uncorrectable errors
    ("nvlink_errors", True, *COUNT),  # CRC + replay + recovery, summed over links
    ("xid", True, 0.0, 1e6),  # the last XID seen (a code, not a count); 0: none
)
PORT_FIELDS = (
    ("rx", True, *RATE),
    ("tx", True, *RATE),
    ("symbol_errors", True, *COUNT),
    ("link_downed", True, *COUNT),
    ("rcv_errors", True, *COUNT),
    ("state", True, 0.0, 7.0),  # IB port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE
    ("rate_gbps", True, 0.0, 100000.0),  # link rate, "400 Gb/sec (4X NDR)" -> 400
)
MAX_DEVICES = 64  # GPUs or ports of one VM: indexes 0..63
GPU_NAMES = tuple(name for name, *_rest in GPU_FIELDS)
PORT_NAMES = tuple(name for name, *_rest in PORT_FIELDS)


def device_series(kind, fields, device):
    """A device's three series (raw, per minute, per hour): ``{kind}Sample``,
    ``{kind}MinuteRollup`` and ``{kind}HourRollup``, each keyed by the device's number."""
    table = kind.lower()
    return tuple(
        series_model(
            f"{kind}{suffix}",
            column,
            fields,
            f"metrics_{table}{index}",
            module=__name__,
            device=device,
        )
        for suffix, column, index in (
            ("Sample", "ts", "sample_ts"),
            ("MinuteRollup", "bucket", "minute_bucket"),
            ("HourRollup", "bucket", "hour_bucket"),
        )
    )


GpuSample, GpuMinuteRollup, GpuHourRollup = device_series("Gpu", GPU_FIELDS, "gpu")
PortSample, PortMinuteRollup, PortHourRollup = device_series("Port", PORT_FIELDS, "port")


@dataclass(frozen=True)
class Series:
    """One stored series: raw rows, minute and hour rollups, the key columns before the
    instant, and the field table."""

    name: str
    raw: type[models.Model]
    minute: type[models.Model]
    hour: type[models.Model]
    keys: tuple
    fields: tuple

    @property
    def names(self) -> tuple:
        return tuple(name for name, *_rest in self.fields)
