"""The tool parsers on output the tools really printed (fixtures/real/README.md says where
each file comes from). Every expected figure was read off the fixture by hand."""

from pathlib import Path

import pytest

from clusters.models.validation import Verdict
from clusters.validation import verdict
from clusters.validation.thresholds import threshold_for
from metrics.vm_agent import toolparse
from portal.catalog.models import FabricType

REAL = Path(__file__).parent / "fixtures" / "real"


def parse(tool, name):
    return toolparse.parse(tool, (REAL / name).read_text())


@pytest.mark.parametrize(
    ("name", "hosts", "busbw", "avg"),
    [
        # Out-of-place 338.82 beats in-place 337.35 at 8 GiB.
        (
            "all_reduce_perf-h100-2node-16gpu-mpi-8G.txt",
            ["ztan-mig-235z", "ztan-mig-gq73"],
            338.82,
            70.742,
        ),
        # In-place 220.61 beats out-of-place 219.51 at 8 GiB.
        (
            "all_reduce_perf-h100-2node-g8-mpi-8G.txt",
            ["alpha-test-16way-node-001", "alpha-test-16way-node-002"],
            220.61,
            50.906,
        ),
    ],
)
def test_all_reduce_perf_two_h100_nodes(name, hosts, busbw, avg):
    figures = parse("all_reduce_perf", name)
    assert figures["ranks"] == 16 and figures["hosts"] == hosts
    assert figures["rows"] == 31  # 8 B to 8 GiB, doubling
    assert figures["bytes"] == 8 * 2**30 and figures["busbw_gbs"] == busbw
    assert figures["wrong"] == 0 and figures["avg_busbw_gbs"] == avg


@pytest.mark.django_db
def test_a_real_two_node_figure_is_judged_against_the_h100_threshold(world):
    """338.82 GB/s is 77% of the H100 two-node threshold (440 GB/s): far below it, 불량."""
    figures = parse("all_reduce_perf", "all_reduce_perf-h100-2node-16gpu-mpi-8G.txt")
    threshold = threshold_for(world.h100, FabricType.INFINIBAND)
    assert threshold.multi_busbw_gbs == 440.0
    level = verdict.figure_level(
        figures["busbw_gbs"], threshold.multi_busbw_gbs, threshold.margin_percent
    )
    assert level == Verdict.BAD


@pytest.mark.parametrize(
    ("name", "device", "link", "size", "peak", "average"),
    [
        ("ib_write_bw-cx7-ndr400-ib-gbits.txt", "mlx5_0", "IB", 65536, 392.38, 392.34),
        ("ib_write_bw-roce-100g-4qp-rdmacm-gbits.txt", "mlx5_5", "Ethernet", 65536, 98.01, 98.01),
        # MB/sec (no --report_gbits): the sweep's last row, 23326.82 / 23317.65 MB/s.
        ("ib_write_bw-cx6-hdr200-ib-sweep-mbsec.txt", "mlx5_0", "IB", 8388608, 186.61, 186.54),
    ],
)
def test_ib_write_bw_clients(name, device, link, size, peak, average):
    figures = parse("ib_write_bw", name)
    assert (figures["device"], figures["link"], figures["bytes"]) == (device, link, size)
    assert figures["peak_gbps"] == pytest.approx(peak, abs=0.01)
    assert figures["average_gbps"] == pytest.approx(average, abs=0.01)


def test_dcgmi_diag_r2_and_r3_documents():
    r2 = parse("dcgmi", "dcgmi-diag-r2-dcgm3-1gpu-virtualclient.json")
    assert len(r2["tests"]) == 11 and r2["failed"] == [] and r2["warned"] == []
    r3 = parse("dcgmi", "dcgmi-diag-r3-dcgm3-1gpu-virtualclient.json")
    statuses = {test["name"]: test["status"] for test in r3["tests"]}
    assert len(statuses) == 16
    assert statuses["EUD Test"] == "skip"  # a skipped test is neither failed nor warned
    assert statuses["Targeted Stress"] == statuses["Memory Bandwidth"] == "pass"
    assert r3["failed"] == [] and r3["warned"] == []
    assert {tuple(test["gpus"]) for test in r3["tests"] if test["name"] == "Diagnostic"} == {(0,)}
