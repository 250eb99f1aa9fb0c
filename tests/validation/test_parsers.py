"""The tool-output parsers against output in the tools' real formats (fixtures/)."""

from pathlib import Path

import pytest

from metrics.vm_agent import toolparse

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name):
    return (FIXTURES / name).read_text()


def test_nvidia_smi_list_counts_gpus_and_names_the_gap():
    figures = toolparse.parse("nvidia-smi", fixture("nvidia_smi_L.txt"))
    assert figures["count"] == 7
    assert [g["index"] for g in figures["gpus"]] == [0, 1, 2, 3, 4, 5, 7]
    assert figures["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"


def test_dcgmi_v3_document_after_its_banner_passes():
    figures = toolparse.parse("dcgmi", fixture("dcgmi_diag_r1_v3_pass.json"))
    assert figures["version"] == "3.3.9"
    assert figures["driver"] == "550.127.05"
    assert len(figures["tests"]) == 9
    assert figures["failed"] == [] and figures["warned"] == []


def test_dcgmi_v4_document_names_the_failing_gpu_and_why():
    figures = toolparse.parse("dcgmi", fixture("dcgmi_diag_r2_v4_fail.json"))
    assert figures["version"] == "4.1.1" and figures["driver"] == "570.124.06"
    (failed,) = figures["failed"]
    assert (failed["name"], failed["gpus"]) == ("memory", [1])
    assert "Uncorrectable ECC" in failed["warnings"][0]
    (warned,) = figures["warned"]
    assert warned["name"] == "pcie" and warned["gpus"] == [1]
    assert any("x8" in w for w in warned["warnings"])


@pytest.mark.parametrize("status", ["Inconclusive", "", "aborted"])
def test_dcgmi_unknown_status_word_is_a_failure(status):
    text = (
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": ['
        '{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 3, '
        f'"status": "{status}"}}]}}]}}]}}}}'
    )
    (failed,) = toolparse.parse("dcgmi", text)["failed"]
    assert failed["gpus"] == [3]


@pytest.mark.parametrize(
    "text", ["", "Error: unable to connect to host engine", "{not json", '{"other": {}}']
)
def test_dcgmi_refuses_what_is_not_a_result_document(text):
    with pytest.raises(toolparse.ParseError):
        toolparse.parse("dcgmi", text)


def test_ib_write_bw_in_gbits():
    figures = toolparse.parse("ib_write_bw", fixture("ib_write_bw_ndr.txt"))
    assert figures == {
        "device": "mlx5_0",
        "link": "IB",
        "bytes": 1048576,
        "peak_gbps": 392.11,
        "average_gbps": 391.74,
    }


def test_ib_write_bw_roce_in_megabytes_is_converted_to_gbits():
    figures = toolparse.parse("ib_write_bw", fixture("ib_write_bw_roce_mb.txt"))
    assert figures["device"] == "mlx5_5" and figures["link"] == "Ethernet"
    assert figures["average_gbps"] == pytest.approx(26512.08 / 125, abs=0.01)  # 212.10


def test_ib_write_bw_that_never_connected_is_a_parse_error():
    with pytest.raises(toolparse.ParseError, match="did it connect"):
        toolparse.parse("ib_write_bw", fixture("ib_write_bw_refused.txt"))


def test_all_reduce_perf_bus_bandwidth_at_the_largest_size():
    figures = toolparse.parse("all_reduce_perf", fixture("all_reduce_perf_2node.txt"))
    assert figures["bytes"] == 8589934592
    assert figures["busbw_gbs"] == 445.07  # in-place beats out-of-place (444.91) here
    assert figures["ranks"] == 16 and figures["hosts"] == ["gpu-node-01", "gpu-node-02"]
    assert figures["wrong"] == 0 and figures["avg_busbw_gbs"] == 442.41


def test_all_reduce_perf_counts_wrong_values_and_reads_na():
    figures = toolparse.parse("all_reduce_perf", fixture("all_reduce_perf_local_wrong.txt"))
    assert figures["wrong"] == 2
    assert figures["rows"] == 5 and figures["hosts"] == ["gpu-node-04"]


def test_all_reduce_perf_without_rows_is_a_parse_error():
    with pytest.raises(toolparse.ParseError):
        toolparse.parse("all_reduce_perf", "# nThread 1 nGpus 8\n# Using devices\n")


def test_port_status_states_and_counters():
    ports = toolparse.parse("ports", fixture("port_status.txt"))["ports"]
    assert ports["mlx5_0/1"] == {
        "state": "ACTIVE",
        "rate": "400 Gb/sec (4X NDR)",
        "symbol_error": 0,
        "link_downed": 0,
    }
    assert ports["mlx5_5/1"]["state"] == "DOWN" and ports["mlx5_5/1"]["link_downed"] == 3


def test_unknown_tool_is_refused():
    with pytest.raises(toolparse.ParseError):
        toolparse.parse("rm", "")
