"""The exporter parsers on output the exporters really produced (fixtures/real/README.md
says where each file comes from): node_exporter's own end-to-end output and a RoCE host's
scrape, dcgm-exporter on an L40S and on an A100 in MIG mode. Every figure expected here was
read off the fixture by hand."""

from pathlib import Path

from metrics.vm_agent import exporters as agent_exporters
from metrics.vm_agent import main as agent
from tests.metrics.test_agent_sources import serve_exporters

REAL = Path(__file__).parent / "fixtures" / "real"


def text(name):
    return (REAL / name).read_text()


def test_node_exporter_e2e_output():
    ports = agent_exporters.parse_node(text("node-exporter-e2e.txt"))
    # (device, port) order: i40iw0/1, mlx4_0/1, mlx4_0/2.
    assert [p["port"] for p in ports] == [0, 1, 2]
    i40iw, mlx4_1, mlx4_2 = ports
    # An iWARP device exports its state and rate only: no counters, and none are made up.
    assert i40iw == {
        "port": 0,
        "rx_bytes": None,
        "tx_bytes": None,
        "symbol_errors": None,
        "link_downed": None,
        "rcv_errors": None,
        "state": 4.0,
        "rate_gbps": 10.0,
    }
    assert mlx4_1 == {
        "port": 1,
        "rx_bytes": 1.8527668e07,
        "tx_bytes": 1.493376e07,
        "symbol_errors": None,
        "link_downed": 0.0,
        "rcv_errors": 0.0,
        "state": 4.0,
        "rate_gbps": 40.0,
    }
    assert (mlx4_2["rx_bytes"], mlx4_2["rcv_errors"], mlx4_2["rate_gbps"]) == (0.0, None, 40.0)


def test_node_exporter_on_a_roce_host():
    ports = agent_exporters.parse_node(text("node-exporter-roce.txt"))
    assert [p["port"] for p in ports] == [0, 1, 2, 3]  # roceP2p1s0f0, f1, rocep1s0f0, f1
    up, down = ports[0], ports[1]
    assert up == {
        "port": 0,
        "rx_bytes": 2.2031403016e10,
        "tx_bytes": 2.203141234e10,
        "symbol_errors": 0.0,
        "link_downed": 0.0,
        "rcv_errors": 0.0,
        "state": 4.0,
        "rate_gbps": 200.0,
    }
    assert (down["state"], down["rate_gbps"], down["rx_bytes"]) == (1.0, 40.0, 0.0)
    assert ports[2]["tx_bytes"] == 2.2447376952e10


def test_dcgm_exporter_on_an_l40s():
    [gpu] = agent_exporters.parse_dcgm(text("dcgm-exporter-l40s.txt"))
    assert gpu["gpu"] == 0
    assert (gpu["util"], gpu["temp"], gpu["power"], gpu["sm_clock"]) == (0.0, 32.0, 35.686, 210.0)
    # FB_USED + FB_FREE + FB_RESERVED is the card's memory, as NVML reports it.
    assert gpu["mem_used"] == 0.0
    assert gpu["mem_total"] == 0.0 + 45459.0 + 608.0
    assert gpu["remapped_rows"] == 0.0
    # This exporter's default counters have no XID, ECC or NVLink: left empty, not zero.
    assert gpu["xid"] is None and gpu["ecc_uncorrected"] is None and gpu["nvlink_errors"] is None


def test_dcgm_exporter_in_mig_mode_reads_the_whole_gpu_not_its_instances():
    [gpu] = agent_exporters.parse_dcgm(text("dcgm-exporter-a100-mig.txt"))
    assert gpu["gpu"] == 0
    assert (gpu["temp"], gpu["power"], gpu["sm_clock"]) == (61.0, 409.692, 1215.0)
    assert gpu["mem_used"] == 4845.0 and gpu["mem_total"] == 4845.0 + 35690.0
    assert gpu["xid"] == 0.0
    assert gpu["util"] is None  # DCGM has no GPU_UTIL in MIG mode (this sample has none)


def test_the_agent_scrapes_real_output_end_to_end(tmp_path):
    with serve_exporters(
        {
            "/dcgm": (REAL / "dcgm-exporter-l40s.txt").read_bytes(),
            "/node": (REAL / "node-exporter-roce.txt").read_bytes(),
        }
    ) as url:
        sample = agent.make_collector("exporters", tmp_path, f"{url}/dcgm", f"{url}/node").collect()
    assert [g["temp"] for g in sample["gpus"]] == [32.0]
    assert [p["rate_gbps"] for p in sample["ports"]] == [200.0, 40.0, 200.0, 40.0]
    assert [p["state"] for p in sample["ports"]] == [4.0, 1.0, 4.0, 1.0]


def test_a_mig_instances_memory_is_not_added_to_the_cards():
    # Newer dcgm-exporters also report FB_USED/FB_FREE per GPU instance; one such row, with
    # the labels of the real instance above, must not change the physical GPU's figures.
    labels = (
        'gpu="0",UUID="GPU-34319582-d595-d1c7-d1d2-179bcfa61660",device="nvidia0",'
        'GPU_I_PROFILE="1g.5gb",GPU_I_ID="13",Hostname="ub20-a100-k8s"'
    )
    extra = f"DCGM_FI_DEV_FB_USED{{{labels}}} 1200\nDCGM_FI_DEV_FB_FREE{{{labels}}} 3663\n"
    [gpu] = agent_exporters.parse_dcgm(text("dcgm-exporter-a100-mig.txt") + extra)
    assert gpu["mem_used"] == 4845.0 and gpu["mem_total"] == 4845.0 + 35690.0


def test_a_card_reported_only_through_its_mig_instances_is_not_lost():
    # Some dcgm-exporter versions give the card's fields on instance rows only (the labels
    # of the real A100 sample, two instances); the card is then read from them.
    card = 'gpu="0",UUID="GPU-34319582-d595-d1c7-d1d2-179bcfa61660",device="nvidia0"'
    rows = []
    for gid, used, free in (("13", 1200, 3663), ("5", 2000, 2863)):
        labels = f'{card},GPU_I_PROFILE="1g.5gb",GPU_I_ID="{gid}",Hostname="ub20-a100-k8s"'
        for name, value in (
            ("SM_CLOCK", 1215),
            ("GPU_TEMP", 61),
            ("FB_USED", used),
            ("FB_FREE", free),
        ):
            rows.append(f"DCGM_FI_DEV_{name}{{{labels}}} {value}")
    [gpu] = agent_exporters.parse_dcgm("\n".join(rows) + "\n")
    assert (gpu["gpu"], gpu["sm_clock"], gpu["temp"]) == (0, 1215.0, 61.0)
    assert gpu["mem_used"] == 3200.0 and gpu["mem_total"] == 1200 + 3663 + 2000 + 2863
