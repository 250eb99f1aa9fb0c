"""The stored series in Prometheus' text format ("bring your own Grafana"): the
latest sample of each member VM, GPU and fabric port, as gauges labelled with the cluster and
the VM, for a Prometheus that scrapes (federates) the portal.

Written with ``prometheus_client`` (its registry and ``generate_latest``), so names, label
escaping and the format's details are the library's. Only samples of the last
``FRESH_SECONDS`` are exposed: a VM that stopped reporting disappears from the scrape, which
is how Prometheus marks a series stale. Each member's health (``vms.health``) is exposed
whatever its samples, as an enum: ``vc_vm_health{state=…}`` 1 for its state, 0 for the others
(a silent member is exactly the one whose samples stopped).
"""

from datetime import timedelta

from django.db import connection
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from metrics.models import GPU, HOST, PORT
from vms.models import VmHealth

FRESH_SECONDS = 300
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# series -> {field: (metric name, help)}
NAMES = {
    HOST: {
        "cpu_util": ("vc_vm_cpu_utilization_percent", "CPU utilisation of the VM"),
        "mem_util": ("vc_vm_memory_utilization_percent", "Memory utilisation of the VM"),
        "gpu_util": ("vc_vm_gpu_utilization_percent", "Mean utilisation of the VM's GPUs"),
        "gpu_mem_util": ("vc_vm_gpu_memory_utilization_percent", "GPU memory used, all GPUs"),
        "net_rx": ("vc_vm_network_receive_bytes_per_second", "Host network received"),
        "net_tx": ("vc_vm_network_transmit_bytes_per_second", "Host network sent"),
        "fabric_rx": ("vc_vm_fabric_receive_bytes_per_second", "Fabric received, all ports"),
        "fabric_tx": ("vc_vm_fabric_transmit_bytes_per_second", "Fabric sent, all ports"),
    },
    GPU: {
        "util": ("vc_gpu_utilization_percent", "GPU utilisation"),
        "mem_used": ("vc_gpu_memory_used_mib", "GPU framebuffer memory used (MiB)"),
        "mem_total": ("vc_gpu_memory_total_mib", "GPU framebuffer memory (MiB)"),
        "temp": ("vc_gpu_temperature_celsius", "GPU temperature"),
        "power": ("vc_gpu_power_watts", "GPU power draw"),
        "sm_clock": ("vc_gpu_sm_clock_mhz", "SM clock"),
        "throttle": ("vc_gpu_throttle_reasons", "NVML clocks throttle reasons bitmask"),
        "ecc_uncorrected": ("vc_gpu_ecc_uncorrected_errors", "Volatile uncorrectable ECC"),
        "ecc_corrected": ("vc_gpu_ecc_corrected_errors", "Volatile correctable ECC errors"),
        "remapped_rows": ("vc_gpu_remapped_rows", "Rows remapped for uncorrectable errors"),
        "nvlink_errors": ("vc_gpu_nvlink_errors", "NVLink CRC, replay and recovery errors"),
        "xid": ("vc_gpu_last_xid", "The last XID reported (0: none)"),
    },
    PORT: {
        "rx": ("vc_fabric_port_receive_bytes_per_second", "Fabric port received"),
        "tx": ("vc_fabric_port_transmit_bytes_per_second", "Fabric port sent"),
        "symbol_errors": ("vc_fabric_port_symbol_errors", "Symbol errors"),
        "link_downed": ("vc_fabric_port_link_downed", "Times the link went down"),
        "rcv_errors": ("vc_fabric_port_receive_errors", "Packets received with errors"),
        "state": ("vc_fabric_port_state", "Port state (4: ACTIVE)"),
        "rate_gbps": ("vc_fabric_port_rate_gbps", "Link rate (Gb/s)"),
    },
}


def latest(series, vm_ids: list, since) -> list:
    """The newest row of each device of ``vm_ids`` since ``since``: (keys…, ts, fields…)."""
    if not vm_ids:
        return []
    keys = ", ".join(series.keys)
    fields = ", ".join(series.names)
    placeholders = ", ".join(["%s"] * len(vm_ids))
    sql = (
        f"SELECT {keys}, ts, {fields} FROM (SELECT {keys}, ts, {fields}, ROW_NUMBER() OVER "  # noqa: S608 - names from the models and constants; values are parameters
        f"(PARTITION BY {keys} ORDER BY ts DESC) AS newest FROM {series.raw._meta.db_table} "
        f"WHERE vm_id IN ({placeholders}) AND ts >= %s) AS w WHERE newest = 1 "
        f"ORDER BY {keys}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*vm_ids, connection.ops.adapt_datetimefield_value(since)])
        return cursor.fetchall()


class _Snapshot:
    """A one-off collector: the families of one scrape."""

    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def health_family(members: list) -> GaugeMetricFamily:
    """``vc_vm_health``: 1 for each member's health state, 0 for the others."""
    family = GaugeMetricFamily(
        "vc_vm_health",
        "The VM's health (1: its state): OK, SUSPECT, CHECKING, ISOLATED, REPLACING",
        labels=["cluster", "vm", "vm_id", "state"],
    )
    for vm_id, name, cluster, *health in members:
        current = health[0] if health else VmHealth.OK
        for state in VmHealth.values:
            family.add_metric([cluster, name, str(vm_id), state], 1 if state == current else 0)
    return family


def render(members: list, now=None) -> bytes:
    """The exposition text for ``members``: [(vm_id, vm name, cluster name, health)]."""
    now = now or timezone.now()
    since = now - timedelta(seconds=FRESH_SECONDS)
    labels_of = {vm_id: [cluster, name, str(vm_id)] for vm_id, name, cluster, *_h in members}
    vm_ids = list(labels_of)
    families: list = [health_family(members)]
    for series, names in NAMES.items():
        device = series.keys[1:]  # () for the host series, ("gpu",) or ("port",)
        label_names = ["cluster", "vm", "vm_id", *device]
        by_field = {
            field: GaugeMetricFamily(name, text, labels=label_names)
            for field, (name, text) in names.items()
        }
        for row in latest(series, vm_ids, since):
            vm_id, *device_values = row[: len(series.keys)]
            values = row[len(series.keys) + 1 :]
            label_values = [*labels_of[vm_id], *map(str, device_values)]
            for field, value in zip(series.names, values, strict=True):
                if value is not None:
                    by_field[field].add_metric(label_values, value)
        families += by_field.values()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return generate_latest(registry)
