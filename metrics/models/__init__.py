"""metrics' models: host samples, rollups and tokens (``samples``), per-GPU and per-port
series (``devices``), and every series described once (``SERIES``)."""

from metrics.models.cluster import (
    CLUSTER_METRIC_NAMES,
    CLUSTER_METRICS,
    COUNTS,
    PEAKS,
    SUMS,
    ClusterHourRollup,
    ClusterMinuteRollup,
    stat_columns,
)
from metrics.models.devices import (
    COUNT,
    GPU_FIELDS,
    GPU_NAMES,
    MAX_DEVICES,
    MIB,
    PERCENT,
    PORT_FIELDS,
    PORT_NAMES,
    RATE,
    GpuHourRollup,
    GpuMinuteRollup,
    GpuSample,
    PortHourRollup,
    PortMinuteRollup,
    PortSample,
    Series,
)
from metrics.models.samples import (
    METRIC_FIELDS,
    METRIC_NAMES,
    HourRollup,
    MetricsToken,
    MinuteRollup,
    RollupBacklog,
    RollupCursor,
    Sample,
)

HOST = Series("host", Sample, MinuteRollup, HourRollup, ("vm_id",), METRIC_FIELDS)
GPU = Series("gpu", GpuSample, GpuMinuteRollup, GpuHourRollup, ("vm_id", "gpu"), GPU_FIELDS)
PORT = Series("port", PortSample, PortMinuteRollup, PortHourRollup, ("vm_id", "port"), PORT_FIELDS)
SERIES = (HOST, GPU, PORT)

__all__ = [
    "CLUSTER_METRICS",
    "CLUSTER_METRIC_NAMES",
    "COUNT",
    "COUNTS",
    "ClusterHourRollup",
    "ClusterMinuteRollup",
    "GPU",
    "GPU_FIELDS",
    "GPU_NAMES",
    "GpuHourRollup",
    "GpuMinuteRollup",
    "GpuSample",
    "HOST",
    "HourRollup",
    "MAX_DEVICES",
    "METRIC_FIELDS",
    "METRIC_NAMES",
    "MIB",
    "MetricsToken",
    "MinuteRollup",
    "PEAKS",
    "PERCENT",
    "PORT",
    "PORT_FIELDS",
    "PORT_NAMES",
    "PortHourRollup",
    "PortMinuteRollup",
    "PortSample",
    "RATE",
    "RollupBacklog",
    "RollupCursor",
    "SERIES",
    "SUMS",
    "Sample",
    "Series",
    "stat_columns",
]
