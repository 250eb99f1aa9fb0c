"""Parsers for the output of the tools 클러스터 검증 runs (issue 14), standard library only.

The agent (``agent_jobs``) runs the tools on a member VM and posts their raw output
with these figures; the portal parses the raw output again with the same functions, so a
verdict can always be traced to the text shown under 원본 출력. Each parser takes the
tool's stdout as printed and returns a plain dict (JSON-ready); output it cannot read raises
``ParseError`` with what was missing, never a guess.

- ``nvidia-smi -L``: ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`` lines.
- ``dcgmi diag -r 1|2 --json``: DCGM 3.x (``"DCGM GPU Diagnostic"``, ``gpu_ids``) and 4.x
  (``"DCGM Diagnostic"``, ``entity_id``) documents, with any banner before the JSON.
- ``ib_write_bw`` (perftest): the result line under ``#bytes #iterations BW peak BW average``,
  in Gb/s (``--report_gbits``) or MB/s.
- ``all_reduce_perf`` (nccl-tests): the data rows; the bus bandwidth at the largest size.
- port status: what the agent reads from ``/sys/class/infiniband/<dev>/ports/<n>/``
  (``state``, ``rate``, ``counters/symbol_error``, ``counters/link_downed``) as
  ``key: value`` lines under ``== <dev>/<port> ==`` headers.
"""

import json
import re

MB_PER_GBIT = 125.0  # perftest's MB/sec is 10^6 bytes: 1 Gb/s = 125 MB/s


class ParseError(ValueError):
    """The output is not what the tool prints when it ran to the end."""


# ---------------------------------------------------------------------------------------------
# GPUs

_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")


def parse_gpu_list(text: str) -> dict:
    """``nvidia-smi -L``: ``{"count": n, "gpus": [{"index", "name", "uuid"}]}``."""
    gpus = [
        {"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)}
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


def _diag_document(text: str) -> dict:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ParseError("dcgmi diag: no JSON document in the output")
    try:
        document = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ParseError(f"dcgmi diag: {exc}") from None
    body = document.get("DCGM GPU Diagnostic") or document.get("DCGM Diagnostic")
    if not isinstance(body, dict) or not isinstance(body.get("test_categories"), list):
        raise ParseError("dcgmi diag: no 'test_categories' in the document")
    return document | {"_body": body}


def _gpus_of(result: dict) -> list[int]:
    if "entity_id" in result:  # DCGM 4.x: one entity per result
        return [int(result["entity_id"])] if result.get("entity_group", "GPU") == "GPU" else []
    ids = str(result.get("gpu_ids", "")).strip()  # DCGM 3.x: "0" or "0,1,2,3"
    return [int(i) for i in ids.split(",") if i.strip().isdigit()]


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [
            t
            for item in value
            for t in _texts(item.get("warning") if isinstance(item, dict) else item)
        ]
    return []


def parse_dcgmi_diag(text: str) -> dict:
    """``dcgmi diag -r N --json``: every test's outcome per GPU.

    ``{"version", "driver", "tests": [{"category", "name", "status", "gpus": [...],
    "warnings": [...]}], "failed": [...same, status fail...], "warned": [...]}``. A status word
    this parser does not know counts as a failure: an unknown word is no evidence of health.
    """
    document = _diag_document(text)
    body = document["_body"]
    metadata = document.get("metadata") or {}
    tests = []
    for category in body["test_categories"]:
        for test in category.get("tests") or []:
            for result in test.get("results") or []:
                word = str(result.get("status", "")).strip().lower()
                tests.append(
                    {
                        "category": category.get("category", ""),
                        "name": test.get("name", ""),
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
        "version": str(metadata.get("version") or body.get("version") or ""),
        "driver": str(
            metadata.get("Driver Version Detected") or body.get("Driver Version Detected") or ""
        ),
        "tests": tests,
        "failed": [t for t in tests if t["status"] == "fail"],
        "warned": [t for t in tests if t["status"] == "warn"],
    }


# ---------------------------------------------------------------------------------------------
# Fabric

_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average")
_NUMBER_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
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
        "device": device.group(1) if device else "",
        "link": link.group(1) if link else "",
        "bytes": int(last.group(1)),
        "peak_gbps": round(float(last.group(3)) * scale, 2),
        "average_gbps": round(float(last.group(4)) * scale, 2),
    }


_PORT_HEADER = re.compile(r"^== (\S+)/(\d+) ==\s*$")


def parse_port_status(text: str) -> dict:
    """The agent's port readout: ``{"ports": {"mlx5_0/1": {"state", "rate", "symbol_error",
    "link_downed"}}}``; counters as integers, ``state`` as the kernel's word (``ACTIVE``)."""
    ports, current = {}, None
    for line in text.splitlines():
        header = _PORT_HEADER.match(line)
        if header:
            current = ports.setdefault(f"{header.group(1)}/{header.group(2)}", {})
            continue
        key, sep, value = line.partition(":")
        if current is None or not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in ("symbol_error", "link_downed"):
            current[key] = int(value) if value.isdigit() else None
        elif key == "state":
            current[key] = value.split(":")[-1].strip()  # "4: ACTIVE" → ACTIVE
        elif key == "rate":
            current[key] = value
    if not ports and text.strip():
        raise ParseError("port status: no '== device/port ==' section")
    return {"ports": ports}


# ---------------------------------------------------------------------------------------------
# NCCL

_NCCL_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)"
    r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$"
)
_NCCL_RANK = re.compile(r"^#\s+Rank\s+(\d+) .*? on (\S+) device\s+(\d+)")
_NCCL_AVG = re.compile(r"^# Avg bus bandwidth\s*:\s*([\d.]+)")


def parse_all_reduce_perf(text: str) -> dict:
    """nccl-tests' ``all_reduce_perf``: ``{"ranks", "hosts", "rows": n, "bytes",
    "busbw_gbs", "algbw_gbs", "wrong", "avg_busbw_gbs"}``, ``busbw_gbs`` being the better
    of out-of-place and in-place at the largest message size (the published thresholds are
    for large messages); ``wrong`` sums the ``#wrong`` columns of every row (N/A counts 0)."""
    rows = [m for m in map(_NCCL_ROW.match, text.splitlines()) if m]
    if not rows:
        raise ParseError("all_reduce_perf: no data row (size count type redop root time …)")
    ranks = [m for m in map(_NCCL_RANK.match, text.splitlines()) if m]
    last = max(rows, key=lambda m: int(m.group(1)))
    wrong = sum(int(w) for m in rows for w in (m.group(9), m.group(13)) if w.isdigit())
    average = next((m for m in map(_NCCL_AVG.match, text.splitlines()) if m), None)
    return {
        "ranks": len(ranks),
        "hosts": sorted({m.group(2) for m in ranks}),
        "rows": len(rows),
        "bytes": int(last.group(1)),
        "busbw_gbs": max(float(last.group(8)), float(last.group(12))),
        "algbw_gbs": max(float(last.group(7)), float(last.group(11))),
        "wrong": wrong,
        "avg_busbw_gbs": float(average.group(1)) if average else None,
    }


PARSERS = {
    "nvidia-smi": parse_gpu_list,
    "dcgmi": parse_dcgmi_diag,
    "ib_write_bw": parse_ib_write_bw,
    "ports": parse_port_status,
    "all_reduce_perf": parse_all_reduce_perf,
}


def parse(tool: str, text: str) -> dict:
    """The figures of ``tool``'s output (``PARSERS``), or ``ParseError``."""
    parser = PARSERS.get(tool)
    if parser is None:
        raise ParseError(f"unknown tool {tool!r}")
    return parser(text)
