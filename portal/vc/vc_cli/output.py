"""What ``vc`` prints: a table of chosen columns, or the JSON as the API answered it.

Everything ``vc`` writes, to stdout or stderr, goes through ``emit``, which drops what a
terminal would obey instead of show: escape sequences (CSI, OSC such as a window title,
DCS …), the other C0 controls but tab and newline, DEL, the C1 controls, and the bidi
embeddings, overrides, isolates and marks. The strings come from the portal, and some of
them from a member's agent: none may move the cursor, clear the screen or reorder text.
JSON output keeps every character: those JSON does not escape itself are written as
``\\uXXXX``, so the data stays exact and the terminal stays inert."""

import json
import re
import sys

COLUMNS = {
    "cluster": (
        "id",
        "name",
        "status",
        "fabric_type",
        "instance_type",
        "zone",
        "member_count",
        "running_member_count",
    ),
    "vm": (
        "id",
        "name",
        "status",
        "health",
        "zone",
        "instance_type",
        "billing_type",
        "cluster_id",
        "private_ip",
    ),
    "op": ("id", "kind", "done", "created_at", "finished_at"),
    "ssh_key": ("id", "name", "key_type", "bits", "fingerprint", "created_at"),
    "webhook": ("id", "name", "url", "events", "created_at"),
    "webhook_created": ("id", "name", "url", "secret"),
    "delivery": ("id", "event_type", "status", "attempts", "last_attempt", "next_attempt_at"),
    "item": ("vm_id", "target_name", "status", "error"),
    "run": ("operation_id", "created_at", "actor", "level", "done", "seconds", "verdicts"),
    "verdict": ("vm_id", "vm_name", "verdict", "verdict_label", "reasons"),
}

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[\]PX^_][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC … ST
    r"|\x1b[ -/]*[0-~]?"  # any other escape, or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c\n]*(?:\x07|\x9c)"  # 8-bit OSC, DCS … ST
    rf"|[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]"  # other C0 but \t \n, DEL, C1, bidi
)
_JSON_UNSAFE = re.compile(rf"[\x7f-\x9f{_BIDI}]")


def clean(text: str) -> str:
    """``text`` as a terminal may show it: no control sequence, no bidi override."""
    return _UNSAFE.sub("", text)


def emit(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    """Write ``text`` (cleaned) to stdout, or stderr with ``err``: ``vc``'s only way out."""
    stream = sys.stderr if err else sys.stdout
    stream.write(clean(text + end))
    stream.flush()


def as_json(data) -> str:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):  # an error
        return _cell(value.get("message", json.dumps(value, ensure_ascii=False)))
    if isinstance(value, list):  # reasons
        return "; ".join(_cell(v) for v in value) or "-"
    return clean(str(value)).replace("\n", " ").replace("\t", " ")


def table(rows: list[dict], columns) -> str:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def show(args, data, kind: str) -> None:
    if args.output == "json":
        emit(as_json(data))
    elif isinstance(data, list):
        emit(table(data, COLUMNS[kind]))
    elif kind == "op":
        emit(table([data], COLUMNS["op"]))
        if data.get("error"):
            emit(_cell(data["error"]))
        if data.get("items"):
            emit(table(data["items"], COLUMNS["item"]))
    else:
        width = max(len(k) for k in data)
        emit("\n".join(f"{k.ljust(width)}  {_cell(v)}" for k, v in data.items()))
