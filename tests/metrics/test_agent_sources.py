"""Where the agent's per-GPU and per-port figures come from: NVML per GPU, sysfs per
InfiniBand port (4-byte words, "400 Gb/sec (4X NDR)"), and the stock exporters' exposition
text (here an 8-GPU node written in their format; ``test_exporters_real`` runs the parsers
on output the exporters really produced), mapped onto the same fields; what ``--source``
picks."""

import contextlib
import http.server
import threading
from pathlib import Path

import pytest

from metrics.models.devices import GPU_NAMES, PORT_NAMES
from metrics.vm_agent import devices as agent_devices
from metrics.vm_agent import exporters as agent_exporters
from metrics.vm_agent import main as agent
from tests.metrics.fake_nvml import FakeNvml

FIXTURES = Path(__file__).parent / "fixtures"
MIB = agent_devices.MIB


def sysfs_port(
    root,
    device,
    port,
    rcv_words,
    xmit_words,
    *,
    state="4: ACTIVE",
    rate="400 Gb/sec (4X NDR)",
    symbol=0,
    downed=0,
    rcv_errors=0,
):
    path = root / device / "ports" / str(port)
    counters = path / "counters"
    counters.mkdir(parents=True, exist_ok=True)
    for name, value in (
        ("port_rcv_data", rcv_words),
        ("port_xmit_data", xmit_words),
        ("symbol_error", symbol),
        ("link_downed", downed),
        ("port_rcv_errors", rcv_errors),
    ):
        (counters / name).write_text(f"{value}\n")
    (path / "state").write_text(f"{state}\n")
    (path / "rate").write_text(f"{rate}\n")


def test_sysfs_ports_read_words_state_and_rate(tmp_path):
    sysfs_port(tmp_path, "mlx5_1", 1, 5, 6, state="1: DOWN", rate="200 Gb/sec (4X HDR)", downed=3)
    sysfs_port(tmp_path, "mlx5_0", 1, 1_000, 2_000, symbol=7)
    ports = agent_devices.read_ports(tmp_path)
    assert ports == [
        {
            "port": 0,
            "rx_bytes": 4_000,
            "tx_bytes": 8_000,
            "symbol_errors": 7,
            "link_downed": 0,
            "rcv_errors": 0,
            "state": 4,
            "rate_gbps": 400.0,
        },
        {
            "port": 1,
            "rx_bytes": 20,
            "tx_bytes": 24,
            "symbol_errors": 0,
            "link_downed": 3,
            "rcv_errors": 0,
            "state": 1,
            "rate_gbps": 200.0,
        },
    ]


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        ("400 Gb/sec (4X NDR)", 400.0),
        ("100 Gb/sec (4X EDR)", 100.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("unknown", None),
    ],
)
def test_rate_file_forms(text, gbps):
    assert agent_devices.parse_rate(text) == gbps


def test_collector_sends_each_port_as_a_rate_with_its_state(tmp_path):
    sysfs_port(tmp_path, "mlx5_0", 1, 0, 0)
    now = [0.0]
    collector = agent.Collector(tmp_path, clock=lambda: now[0])
    sysfs_port(tmp_path, "mlx5_0", 1, 125_000_000, 250_000_000)  # words
    now[0] = 10.0
    sample = collector.collect()
    assert sample["ports"] == [
        {
            "port": 0,
            "rx": 50e6,
            "tx": 100e6,
            "symbol_errors": 0.0,
            "link_downed": 0.0,
            "rcv_errors": 0.0,
            "state": 4.0,
            "rate_gbps": 400.0,
        }
    ]
    assert set(sample["ports"][0]) <= {"port", *PORT_NAMES}


def test_nvml_reads_every_field_per_gpu_and_keeps_the_last_xid():
    nvml = FakeNvml(
        utils=[97, 58],
        used=[60000 * MIB, 20000 * MIB],
        total=[81559 * MIB, 81559 * MIB],
        temp=[61, 74],
        power_mw=[652417, 388250],
        sm_clock=[1980, 1755],
        throttle=[0, 4],
        ecc=[(0, 2), (1, 0)],
        remapped=[0, 1],
        nvlink=[0, 3],
        xids=[(1, 79)],
    )
    gpus = agent_devices.NvmlGpus(nvml)
    first = gpus.read()
    assert first[1] == {
        "gpu": 1,
        "util": 58,
        "temp": 74,
        "power": 388.25,
        "sm_clock": 1755,
        "throttle": 4,
        "ecc_uncorrected": 1,
        "ecc_corrected": 0,
        "remapped_rows": 1,
        "nvlink_errors": 3 * 2 * 4,
        "mem_used": 20000.0,
        "mem_total": 81559.0,
        "xid": 79,
    }
    assert first[0]["xid"] == 0
    assert set(first[0]) == {"gpu", *GPU_NAMES}
    assert gpus.read()[1]["xid"] == 79  # the last XID stays, as DCGM's gauge


def test_dcgm_exporter_text_maps_onto_the_gpu_fields():
    gpus = agent_exporters.parse_dcgm((FIXTURES / "dcgm-exporter.txt").read_text())
    assert [g["gpu"] for g in gpus] == [0, 1]
    assert gpus[1] == {
        "gpu": 1,
        "util": 57.0,
        "mem_used": 20901.0,
        "mem_total": 20901.0 + 60128.0 + 530.0,
        "temp": 74.0,
        "power": 388.25,
        "sm_clock": 1755.0,
        "throttle": None,
        "ecc_uncorrected": None,
        "ecc_corrected": None,
        "remapped_rows": 1.0,
        "nvlink_errors": None,
        "xid": 79.0,
    }
    assert gpus[0]["xid"] == 0.0 and gpus[0]["util"] == 98.0


def test_node_exporter_text_maps_onto_the_port_fields():
    ports = agent_exporters.parse_node((FIXTURES / "node-exporter-infiniband.txt").read_text())
    # Indexed by (device, port) as the sysfs reader orders them.
    assert [p["port"] for p in ports] == [0, 1, 2, 3]
    assert ports[1] == {
        "port": 1,
        "rx_bytes": 1.1015701508e13,
        "tx_bytes": 1.101570617e13,
        "symbol_errors": 311.0,
        "link_downed": 2.0,
        "rcv_errors": 17.0,
        "state": 4.0,
        "rate_gbps": 400.0,
    }
    assert ports[3]["state"] == 1.0


def test_exporter_parsers_refuse_what_is_not_the_text_format():
    with pytest.raises(ValueError, match="could not convert string to float"):
        agent_exporters.parse_dcgm("DCGM_FI_DEV_GPU_UTIL{gpu=0 98\n")


class _Exporters(http.server.BaseHTTPRequestHandler):
    bodies: dict = {}

    def do_GET(self):  # http.server's name
        body = self.bodies.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve_exporters(bodies: dict):
    """A loopback HTTP server answering ``bodies`` ({path: bytes}) as exporters do; yields
    its base URL."""
    handler = type("Handler", (_Exporters,), {"bodies": bodies})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def exporters():
    bodies = {
        "/dcgm": (FIXTURES / "dcgm-exporter.txt").read_bytes(),
        "/node": (FIXTURES / "node-exporter-infiniband.txt").read_bytes(),
    }
    with serve_exporters(bodies) as url:
        yield url


def test_source_exporters_scrapes_both_and_reports_per_device(exporters, tmp_path):
    collector = agent.make_collector(
        "exporters", tmp_path, f"{exporters}/dcgm", f"{exporters}/node"
    )
    sample = collector.collect()
    assert [g["util"] for g in sample["gpus"]] == [98.0, 57.0]
    assert sample["gpu_util"] == 77.5
    assert len(sample["ports"]) == 4 and sample["ports"][1]["rate_gbps"] == 400.0


def test_source_auto_falls_back_to_the_exporters_without_nvml_or_sysfs(exporters, tmp_path):
    collector = agent.make_collector(
        "auto", tmp_path / "none", f"{exporters}/dcgm", f"{exporters}/node"
    )
    assert isinstance(collector.gpus, agent_exporters.ExporterGpus)
    assert isinstance(collector.ports, agent_exporters.ExporterPorts)
    sysfs_port(tmp_path / "ib", "mlx5_0", 1, 0, 0)
    local = agent.make_collector("auto", tmp_path / "ib", f"{exporters}/dcgm", f"{exporters}/node")
    assert isinstance(local.ports, agent_devices.SysfsPorts)


def test_source_auto_without_anything_reports_the_host_only(tmp_path):
    closed = "http://127.0.0.1:9/metrics"
    sample = agent.make_collector("auto", tmp_path, closed, closed).collect()
    assert sample["gpus"] is None and sample["ports"] is None and sample["gpu_util"] is None
