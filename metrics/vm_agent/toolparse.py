"""Parsers for the output of the tools 클러스터 검증 runs, standard library only.

The agent (``jobs``) runs the tools on a member VM and posts their raw output
with these figures; the portal parses the raw output again with the same functions, so a
verdict can always be traced to the text shown under 원본 출력. Each parser takes the
tool's stdout as printed and returns a plain dict (JSON-ready); output it cannot read raises
``ParseError`` with what was missing, never a guess.

Whatever the text, the answer is figures within range or ``ParseError``: digits are ASCII
only (``\\d`` would take ``٣``, and ``str.isdigit`` takes ``²``, which ``int`` refuses), every
number is bounded (``MAX_COUNT``, ``MAX_BYTES``, ``MAX_RATE``: no 26-digit message size, no
infinite bandwidth), a JSON document is read with its types checked and its numbers and
depth bounded, and a NUL (which PostgreSQL cannot store in text) never reaches a figure.

- ``nvidia-smi -L``: ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`` lines.
- ``dcgmi diag -r 1|2 --json``: DCGM 3.x (``"DCGM GPU Diagnostic"``, ``gpu_ids``) and 4.x
  (``"DCGM Diagnostic"``, ``entity_id``) documents, with any banner before the JSON.
- ``ib_write_bw`` (perftest): the result line under ``#bytes #iterations BW peak BW average``,
  in Gb/s (``--report_gbits``) or MB/s.
- ``all_reduce_perf`` (nccl-tests): the data rows; the bus bandwidth at the largest size.
- ``python3 -m vc_metrics_agent.allreduce`` (the agent's MPI all-reduce, for members without
  GPUs): its banner, then ``all_reduce_perf``'s columns, read as those.
- port status: what the agent reads from ``/sys/class/infiniband/<dev>/ports/<n>/``
  (``state``, ``rate``, ``counters/symbol_error``, ``counters/link_downed``) as
  ``key: value`` lines under ``== <dev>/<port> ==`` headers.
"""

import json
import math
import re

MB_PER_GBIT = 125.0  # perftest's MB/sec is 10^6 bytes: 1 Gb/s = 125 MB/s
GBPS_DIGITS = 5  # 0.01 MB/s, perftest's own resolution in MB/s (a soft fabric's few MB/s)
MAX_COUNT = 2**63 - 1  # a counter, an index: what a bigint column (and any JSON reader) holds
MAX_BYTES = 2**50  # a message size: a pebibyte, far past any test's largest
MAX_RATE = 100_000.0  # Gb/s or GB/s: a hundred times today's fastest port or NVLink ring
MAX_GPU = 65_535  # a GPU's index or DCGM entity id
MAX_JSON_DEPTH = 32  # dcgmi's documents are six deep
MAX_NAME = 200  # characters of a name or word kept as a figure


class ParseError(ValueError):
    """The output is not what the tool prints when it ran to the end."""


def _int(text, high: int = MAX_COUNT, what: str = "number") -> int:
    """A non-negative integer of ASCII digits up to ``high``, or ``ParseError``."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and re.fullmatch(r"[0-9]{1,19}", text.strip()):
        value = int(text.strip())
    else:
        raise ParseError(f"{what}: not a whole number ({_shown(text)})")
    if not 0 <= value <= high:
        raise ParseError(f"{what}: {_shown(value)} is out of range (0 to {high})")
    return value


def _rate(text: str, scale: float = 1.0, what: str = "bandwidth") -> float:
    """A finite non-negative bandwidth of at most ``MAX_RATE`` after ``scale``, or
    ``ParseError``."""
    value = float(text) * scale if re.fullmatch(r"[0-9]{1,12}(\.[0-9]{1,12})?", text) else -1.0
    if not (math.isfinite(value) and 0 <= value <= MAX_RATE):
        raise ParseError(f"{what}: {_shown(text)} is not a rate between 0 and {MAX_RATE:g}")
    return value


def _shown(value) -> str:
    text = _name(value if isinstance(value, str) else repr(value), 25)
    return text[:24] + "…" if len(text) > 24 else text


def _name(value, limit: int = MAX_NAME) -> str:
    """A name or word as a figure: text, bounded, without NUL."""
    return str(value)[:limit].replace("\x00", "\ufffd")


# ---------------------------------------------------------------------------------------------
# GPUs

_GPU_LINE = re.compile(r"^GPU ([0-9]{1,5}): (.+?) \(UUID: ([^)]+)\)\s*$")


def parse_gpu_list(text: str) -> dict:
    """``nvidia-smi -L``: ``{"count": n, "gpus": [{"index", "name", "uuid"}]}``."""
    gpus = [
        {"index": int(m.group(1)), "name": _name(m.group(2)), "uuid": _name(m.group(3))}
        for m in map(_GPU_LINE.match, text.splitlines())
        if m
    ]
    if not gpus and text.strip():
        raise ParseError("nvidia-smi -L: no 'GPU n: … (UUID: …)' line")
    return {"count": len(gpus), "gpus": gpus}


_STATUS_WORDS = {
    "pass": "pass",
    "fail": "fail",
    "warn": "warn",
    "skip": "skip",
    "skipped": "skip",
    "not run": "skip",
}


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _json_number(text: str):
    """``json.loads``' hook for numbers: bounded integers and finite floats only."""
    if re.fullmatch(r"-?[0-9]{1,19}", text):
        return int(text)
    value = float(text) if len(text) <= 40 else math.inf
    if not math.isfinite(value) or abs(value) > MAX_COUNT:
        raise ParseError(f"dcgmi diag: the number {_shown(text)} is out of range")
    return value


def _refuse_constant(name):
    raise ParseError(f"dcgmi diag: {name} is not a number")


def _diag_document(text: str) -> dict:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ParseError("dcgmi diag: no JSON document in the output")
    source = text[start : end + 1]
    depth, deepest = 0, 0
    for bracket in re.findall(r"[\[\]{}]", _JSON_STRING.sub("", source)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_JSON_DEPTH:
        raise ParseError(f"dcgmi diag: the document is nested deeper than {MAX_JSON_DEPTH}")
    try:
        document = json.loads(
            source,
            parse_int=_json_number,
            parse_float=_json_number,
            parse_constant=_refuse_constant,
        )
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ParseError(f"dcgmi diag: {exc}") from None
    document = _typed(document, dict, "the document")
    body = document.get("DCGM GPU Diagnostic") or document.get("DCGM Diagnostic")
    if not isinstance(body, dict) or not isinstance(body.get("test_categories"), list):
        raise ParseError("dcgmi diag: no 'test_categories' in the document")
    return document | {"_body": body}


def _typed(value, kind: type, what: str):
    """``value`` if it is a ``kind`` (None counting as an empty one), or ``ParseError``."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ParseError(f"dcgmi diag: {what} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _gpus_of(result: dict) -> list[int]:
    if "entity_id" in result:  # DCGM 4.x: one entity per result
        if result.get("entity_group", "GPU") != "GPU":
            return []
        return [_int(result["entity_id"], MAX_GPU, "dcgmi diag: entity_id")]
    ids = result.get("gpu_ids", "")  # DCGM 3.x: "0" or "0,1,2,3"
    pieces = ids.split(",") if isinstance(ids, str) else [ids]
    return [_int(i, MAX_GPU, "dcgmi diag: gpu_ids") for i in pieces if i != "" and str(i).strip()]


def _texts(value, depth: int = 0) -> list[str]:
    if isinstance(value, str):
        return [_name(value, 1000)] if value else []
    if isinstance(value, list) and depth < 4:
        return [
            t
            for item in value
            for t in _texts(item.get("warning") if isinstance(item, dict) else item, depth + 1)
        ]
    return []


def parse_dcgmi_diag(text: str) -> dict:
    """``dcgmi diag -r N --json``: every test's outcome per GPU.

    ``{"version", "driver", "tests": [{"category", "name", "status", "gpus": [...],
    "warnings": [...]}], "failed": [...same, status fail...], "warned": [...]}``. A status word
    this parser does not know counts as a failure: an unknown word is no evidence of health.
    A category, test or result that is not a JSON object (or a list where one is expected)
    makes the document unreadable.
    """
    document = _diag_document(text)
    body = document["_body"]
    metadata = _typed(document.get("metadata"), dict, "metadata")
    tests = []
    for category in body["test_categories"]:
        category = _typed(category, dict, "a test category")
        for test in _typed(category.get("tests"), list, "tests"):
            test = _typed(test, dict, "a test")
            for result in _typed(test.get("results"), list, "results"):
                result = _typed(result, dict, "a result")
                word = _name(result.get("status", "")).strip().lower()
                tests.append(
                    {
                        "category": _name(category.get("category", "")),
                        "name": _name(test.get("name", "")),
                        "status": _STATUS_WORDS.get(word, "fail"),
                        "gpus": _gpus_of(result),
                        "warnings": _texts(result.get("warnings")) + _texts(result.get("info"))
                        if word not in ("pass", "skip", "skipped", "not run")
                        else [],
                    }
                )
    if not tests:
        raise ParseError("dcgmi diag: the document holds no test result")
    return {
        "version": _name(metadata.get("version") or body.get("version") or ""),
        "driver": _name(
            metadata.get("Driver Version Detected") or body.get("Driver Version Detected") or ""
        ),
        "tests": tests,
        "failed": [t for t in tests if t["status"] == "fail"],
        "warned": [t for t in tests if t["status"] == "warn"],
    }


# ---------------------------------------------------------------------------------------------
# Fabric

_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average")
_DECIMAL = r"([0-9]+(?:\.[0-9]+)?)"
_NUMBER_ROW = re.compile(
    rf"^\s*([0-9]+)\s+([0-9]+)\s+{_DECIMAL}\s+{_DECIMAL}\s+{_DECIMAL}\s*$", re.ASCII
)
_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
_LINK = re.compile(r"Link type\s*:\s*(\S+)")


def parse_ib_write_bw(text: str) -> dict:
    """perftest's ``ib_write_bw``: ``{"device", "link", "bytes", "peak_gbps",
    "average_gbps"}`` from the result row (the largest message size when ``-a``)."""
    header = _BW_HEADER.search(text)
    if header is None:
        raise ParseError("ib_write_bw: no '#bytes #iterations BW peak' header (did it connect?)")
    rows = [m for m in map(_NUMBER_ROW.match, text[header.end() :].splitlines()) if m]
    if not rows:
        raise ParseError("ib_write_bw: no result row under the header")
    last = rows[-1]
    scale = 1.0 if header.group(1) == "Gb" else 1 / MB_PER_GBIT
    device, link = _DEVICE.search(text), _LINK.search(text)
    return {
        "device": _name(device.group(1)) if device else "",
        "link": _name(link.group(1)) if link else "",
        "bytes": _int(last.group(1), MAX_BYTES, "ib_write_bw: #bytes"),
        "peak_gbps": round(_rate(last.group(3), scale, "ib_write_bw: BW peak"), GBPS_DIGITS),
        "average_gbps": round(_rate(last.group(4), scale, "ib_write_bw: BW average"), GBPS_DIGITS),
    }


_PORT_HEADER = re.compile(r"^== (\S{1,64})/([0-9]{1,3}) ==\s*$", re.ASCII)


def parse_port_status(text: str) -> dict:
    """The agent's port readout: ``{"ports": {"mlx5_0/1": {"state", "rate", "symbol_error",
    "link_downed"}}}``; counters as integers (``None`` when not a number within range),
    ``state`` as the kernel's word (``ACTIVE``)."""
    ports: dict = {}
    current = None
    for line in text.splitlines():
        header = _PORT_HEADER.match(line)
        if header:
            port = _name(f"{header.group(1)}/{header.group(2)}")
            current = ports.setdefault(port, {})
            continue
        key, sep, value = line.partition(":")
        if current is None or not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in ("symbol_error", "link_downed"):
            try:
                current[key] = _int(value)
            except ParseError:
                current[key] = None
        elif key == "state":
            current[key] = _name(value.split(":")[-1].strip())  # "4: ACTIVE" → ACTIVE
        elif key == "rate":
            current[key] = _name(value)
    if not ports and text.strip():
        raise ParseError("port status: no '== device/port ==' section")
    return {"ports": ports}


# ---------------------------------------------------------------------------------------------
# NCCL

_NCCL_ROW = re.compile(
    rf"^\s*([0-9]+)\s+([0-9]+)\s+(\w+)\s+(\w+)\s+(-?[0-9]+)\s+{_DECIMAL}\s+{_DECIMAL}"
    rf"\s+{_DECIMAL}\s+(\S+)\s+{_DECIMAL}\s+{_DECIMAL}\s+{_DECIMAL}\s+(\S+)\s*$",
    re.ASCII,
)
_NCCL_RANK = re.compile(r"^#\s+Rank\s+([0-9]+) .*? on (\S+) device\s+([0-9]+)", re.ASCII)
_NCCL_AVG = re.compile(rf"^# Avg bus bandwidth\s*:\s*{_DECIMAL}", re.ASCII)


def parse_all_reduce_perf(text: str) -> dict:
    """nccl-tests' ``all_reduce_perf``: ``{"ranks", "hosts", "rows": n, "bytes",
    "busbw_gbs", "algbw_gbs", "wrong", "avg_busbw_gbs"}``, ``busbw_gbs`` being the better
    of out-of-place and in-place at the largest message size (the published thresholds are
    for large messages); ``wrong`` sums the ``#wrong`` columns of every row (N/A counts 0)."""
    rows = [m for m in map(_NCCL_ROW.match, text.splitlines()) if m]
    if not rows:
        raise ParseError("all_reduce_perf: no data row (size count type redop root time …)")
    ranks = [m for m in map(_NCCL_RANK.match, text.splitlines()) if m]
    sizes = [_int(m.group(1), MAX_BYTES, "all_reduce_perf: size") for m in rows]
    last = rows[sizes.index(max(sizes))]
    wrong = sum(
        _int(w, MAX_COUNT, "all_reduce_perf: #wrong")
        for m in rows
        for w in (m.group(9), m.group(13))
        if w != "N/A"
    )
    if wrong > MAX_COUNT:
        raise ParseError("all_reduce_perf: #wrong adds up past any count")
    average = next((m for m in map(_NCCL_AVG.match, text.splitlines()) if m), None)
    bandwidth = "all_reduce_perf: bandwidth"
    return {
        "ranks": len(ranks),
        "hosts": sorted({_name(m.group(2)) for m in ranks}),
        "rows": len(rows),
        "bytes": max(sizes),
        "busbw_gbs": max(
            _rate(last.group(8), what=bandwidth), _rate(last.group(12), what=bandwidth)
        ),
        "algbw_gbs": max(
            _rate(last.group(7), what=bandwidth), _rate(last.group(11), what=bandwidth)
        ),
        "wrong": wrong,
        "avg_busbw_gbs": _rate(average.group(1), what=bandwidth) if average else None,
    }


_ALLREDUCE_BANNER = re.compile(r"^# vc_metrics_agent\.allreduce ranks ([0-9]{1,6}) ", re.ASCII)


def parse_allreduce(text: str) -> dict:
    """The agent's MPI all-reduce (``allreduce``): ``parse_all_reduce_perf``'s figures, with
    ``"runner": "mpi"`` and ``ranks`` from its banner (one process per node)."""
    banner = next((m for m in map(_ALLREDUCE_BANNER.match, text.splitlines()) if m), None)
    if banner is None:
        raise ParseError("allreduce: no '# vc_metrics_agent.allreduce ranks n' banner")
    figures = parse_all_reduce_perf(text)
    return {
        **figures,
        "ranks": _int(banner.group(1), MAX_COUNT, "allreduce: ranks"),
        "runner": "mpi",
    }


PARSERS = {
    "nvidia-smi": parse_gpu_list,
    "dcgmi": parse_dcgmi_diag,
    "ib_write_bw": parse_ib_write_bw,
    "ports": parse_port_status,
    "all_reduce_perf": parse_all_reduce_perf,
    "allreduce": parse_allreduce,
}


def parse(tool: str, text: str) -> dict:
    """The figures of ``tool``'s output (``PARSERS``), or ``ParseError``: whatever the text,
    never another exception (a slip in a parser reads as output it could not read)."""
    parser = PARSERS.get(tool)
    if parser is None:
        raise ParseError(f"unknown tool {_shown(tool)}")
    try:
        return parser(text)
    except ParseError:
        raise
    except (
        ValueError,
        TypeError,
        LookupError,
        AttributeError,
        ArithmeticError,
        RecursionError,
    ) as exc:
        raise ParseError(f"{tool}: unreadable output ({type(exc).__name__})") from None
