"""Every tool-output parser against whatever an agent might send: arbitrary text and bytes,
the real outputs with their numbers swapped for hostile ones, and dcgmi documents of any
JSON shape. The answer is always figures within range (storable in PostgreSQL, readable by
orjson) or ``ParseError``; never another exception."""

import json
import math
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.validation import jobs
from metrics.vm_agent import toolparse

FIXTURES = Path(__file__).parent / "fixtures"
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same examples on every run: the suite never flakes on a new draw
    suppress_health_check=[HealthCheck.too_slow],
)
HOSTILE_NUMBERS = [
    "9" * 26,  # a 26-digit message size
    "9" * 5000,  # past int()'s 4300-digit limit
    "1" + "0" * 400,  # a float that overflows to inf
    "²",  # str.isdigit() says yes, int() says no
    "٣",  # an Arabic-Indic digit: \d matches it and int() takes it
    "1.2.3",
    "-1",
    "\x00",
    "inf",
    "NaN",
]
SAMPLES = {
    "nvidia-smi": "nvidia_smi_L.txt",
    "dcgmi": "dcgmi_diag_r2_v4_fail.json",
    "ib_write_bw": "ib_write_bw_ndr.txt",
    "ports": "port_status.txt",
    "all_reduce_perf": "all_reduce_perf_2node.txt",
    "allreduce": "allreduce_2node.txt",
}


def assert_figures_or_parse_error(tool, text):
    try:
        figures = toolparse.parse(tool, text)
    except toolparse.ParseError:
        return
    orjson.dumps(figures)  # every integer within 64 bits, nothing nested too deep
    encoded = json.dumps(figures, allow_nan=False)  # as Django stores it: finite floats only
    assert "\\u0000" not in encoded  # PostgreSQL stores no NUL
    for number in _numbers(figures):
        assert 0 <= number <= toolparse.MAX_COUNT and math.isfinite(number), number


def _numbers(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value


tools = st.sampled_from(sorted(toolparse.PARSERS))


@FUZZ
@given(tool=tools, text=st.text(max_size=400))
def test_any_text(tool, text):
    assert_figures_or_parse_error(tool, text)


@FUZZ
@given(tool=tools, data=st.binary(max_size=400))
def test_any_bytes(tool, data):
    assert_figures_or_parse_error(tool, data.decode("utf-8", "replace"))
    assert_figures_or_parse_error(tool, data.decode("latin-1"))


@FUZZ
@given(tool=tools, data=st.data())
def test_real_output_with_hostile_numbers(tool, data):
    """Each number of a real output (a digit run) may become a hostile one: the parsers get
    past their headers and reach every conversion."""
    text = (FIXTURES / SAMPLES[tool]).read_text()
    pieces = re.split(r"([0-9]+(?:\.[0-9]+)?)", text)
    swap = st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.text(max_size=6))
    for index in range(1, len(pieces), 2):
        if data.draw(st.integers(0, 7), label="swap this one if 0") == 0:
            pieces[index] = data.draw(swap)
    assert_figures_or_parse_error(tool, "".join(pieces))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


def _dumped(value):
    return json.dumps(value)  # NaN and Infinity as dcgmi would never print them


@FUZZ
@given(
    category=json_values,
    tests=json_values,
    result=st.dictionaries(
        st.sampled_from(["status", "entity_id", "entity_group", "gpu_ids", "warnings", "info"]),
        json_values,
    ),
    metadata=json_values,
)
def test_dcgmi_documents_of_any_shape(category, tests, result, metadata):
    for document in (
        {"DCGM Diagnostic": {"test_categories": [category]}},
        {"DCGM Diagnostic": {"test_categories": [{"category": category, "tests": tests}]}},
        {
            "metadata": metadata,
            "DCGM GPU Diagnostic": {
                "test_categories": [{"tests": [{"name": "memory", "results": [result]}]}]
            },
        },
    ):
        assert_figures_or_parse_error("dcgmi", "banner\n" + _dumped(document))


@pytest.mark.parametrize(
    ("tool", "text"),
    [
        ("dcgmi", '{"DCGM Diagnostic": {"test_categories": [5]}}'),
        ("dcgmi", '{"DCGM Diagnostic": {"test_categories": [{"tests": 5}]}}'),
        ("dcgmi", '{"metadata": [1], "DCGM Diagnostic": {"test_categories": []}}'),
        (
            "dcgmi",
            '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": '
            '[{"gpu_ids": "\u00b2", "status": "Fail"}]}]}]}}',
        ),
        (
            "dcgmi",
            '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": '
            '[{"entity_id": 1' + "0" * 5000 + ', "status": "Fail"}]}]}]}}',
        ),
        ("dcgmi", '{"x": ' + "[" * 50_000 + "]" * 50_000 + "}"),
        ("ports", "== mlx5_0/1 ==\nsymbol_error: \u00b2\n"),
        ("ports", "== mlx5_0/1 ==\nlink_downed: " + "9" * 5000 + "\n"),
        ("nvidia-smi", "GPU " + "9" * 5000 + ": x (UUID: y)\n"),
        ("all_reduce_perf", "  " + "9" * 26 + " 2 float sum -1 1 1 1 0 1 1 1 0\n"),
        ("all_reduce_perf", "  " + "9" * 5000 + " 2 float sum -1 1 1 1 0 1 1 1 0\n"),
        ("all_reduce_perf", "  1024 2 float sum -1 1 1 " + "9" * 400 + " 0 1 1 1 0\n"),
        (
            "ib_write_bw",
            "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]\n"
            " 65536 5000 " + "9" * 400 + " " + "9" * 400 + " 1.0\n",
        ),
    ],
    ids=lambda value: value[:40].replace("[", "").replace("9" * 30, "9…") or "empty",
)
def test_the_outputs_that_crashed_a_parser(tool, text):
    assert_figures_or_parse_error(tool, text)


def test_a_counter_out_of_range_is_unreadable_not_a_huge_figure():
    ports = toolparse.parse("ports", "== mlx5_0/1 ==\nsymbol_error: ²\nlink_downed: " + "9" * 30)
    assert ports == {"ports": {"mlx5_0/1": {"symbol_error": None, "link_downed": None}}}
    with pytest.raises(toolparse.ParseError, match="size"):
        toolparse.parse("all_reduce_perf", "  " + "9" * 26 + " 2 float sum -1 1 1 1 0 1 1 1 0\n")


@FUZZ
@given(
    outputs=st.lists(
        st.tuples(tools, st.text(max_size=200), st.none() | st.text(max_size=40)),
        min_size=1,
        max_size=4,
    )
)
def test_a_jobs_figures_are_storable_whatever_its_outputs(outputs):
    """What ``record`` stores for a job, from outputs as ``clean_outputs`` passes them."""
    cleaned = [
        {"tool": tool, "stdout": jobs.without_nul(text), "exit_code": 0}
        | ({"device": jobs.without_nul(device)} if device is not None else {})
        for tool, text, device in outputs
    ]
    figures, error = jobs.figures_of("gpu", cleaned)
    encoded = json.dumps({**figures, "error": error}, allow_nan=False)
    assert "\\u0000" not in encoded
    orjson.dumps(figures)
