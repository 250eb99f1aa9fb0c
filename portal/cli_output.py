"""What ``vc`` prints: a table of chosen columns, or the JSON as the API answered it."""

import json

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
        "zone",
        "instance_type",
        "billing_type",
        "cluster_id",
        "private_ip",
    ),
    "op": ("id", "kind", "done", "created_at", "finished_at"),
    "item": ("vm_id", "target_name", "status", "error"),
    "run": ("operation_id", "created_at", "actor", "level", "done", "seconds", "verdicts"),
    "verdict": ("vm_id", "vm_name", "verdict", "verdict_label", "reasons"),
}


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):  # an error
        return value.get("message", json.dumps(value, ensure_ascii=False))
    if isinstance(value, list):  # reasons
        return "; ".join(_cell(v) for v in value) or "-"
    return str(value)


def table(rows: list[dict], columns) -> str:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def show(args, data, kind: str) -> None:
    if args.output == "json":
        print(json.dumps(data, ensure_ascii=False, indent=2))
    elif isinstance(data, list):
        print(table(data, COLUMNS[kind]))
    elif kind == "op":
        print(table([data], COLUMNS["op"]))
        if data.get("error"):
            print(_cell(data["error"]))
        if data.get("items"):
            print(table(data["items"], COLUMNS["item"]))
    else:
        width = max(len(k) for k in data)
        print("\n".join(f"{k.ljust(width)}  {_cell(v)}" for k, v in data.items()))
