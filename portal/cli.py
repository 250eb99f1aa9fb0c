"""``vc``: the portal's API from a shell (standard library only: argparse, urllib, json).

Configuration, first found wins: ``--url``/``--token``; ``VC_URL``/``VC_TOKEN``; the JSON
file ``VC_CONFIG`` (default ``~/.config/vc/config.json``: ``{"url": ..., "token": ...}``).
``VC_LANG=en`` (or ``--lang en``) asks for English messages; Korean is the default.

Exit codes:
  0  done
  1  refused by a rule or invalid input (the message is the rule's), or --wait saw the
     operation fail
  2  usage error (bad arguments, no URL or token configured)
  3  not authenticated (401: missing, bad, expired or revoked token) or permission missing (403)
  4  not found (404: outside the token's project, or no such id or name)
  5  the portal or the network failed (5xx, connection refused, bad answer)
  6  --wait gave up after --timeout seconds (the operation goes on)
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

EXIT_REFUSED, EXIT_USAGE, EXIT_AUTH, EXIT_NOT_FOUND, EXIT_SERVER, EXIT_TIMEOUT = 1, 2, 3, 4, 5, 6
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
}


class CliError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class Client:
    """JSON over HTTP with the bearer token; a problem document becomes a ``CliError``."""

    def __init__(self, url: str, token: str, language: str):
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token
        self.language = language

    def call(self, method: str, path: str, body=None, query=None, raw=False):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept-Language", self.language)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise _problem(error) from None
        except (urllib.error.URLError, OSError) as error:
            raise CliError(f"{url}: {getattr(error, 'reason', error)}", EXIT_SERVER) from None
        if raw:
            return payload.decode()
        return json.loads(payload) if payload else None

    def pages(self, path: str, query: dict):
        """Every item of a list, page after page."""
        query = dict(query, page_size=500)
        while True:
            page = self.call("GET", path, query=query)
            yield from page["items"]
            if not page.get("next_page_token"):
                return
            query["page_token"] = page["next_page_token"]


def _problem(error: urllib.error.HTTPError) -> CliError:
    try:
        problem = json.loads(error.read())
        message = problem.get("detail") or str(error)
        if problem.get("field"):
            message = f"{message} ({problem['field']})"
    except ValueError:
        message = str(error)
    status = error.code
    code = {401: EXIT_AUTH, 403: EXIT_AUTH, 404: EXIT_NOT_FOUND}.get(status)
    if code is None:
        code = EXIT_SERVER if status >= 500 else EXIT_REFUSED
    return CliError(message, code)


# ---------------------------------------------------------------------------------------------
# Output


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):  # an error
        return value.get("message", json.dumps(value, ensure_ascii=False))
    return str(value)


def table(rows: list[dict], columns) -> str:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
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


# ---------------------------------------------------------------------------------------------
# Names and waiting


def resolve(client: Client, kind: str, ref: str) -> int:
    """An id as given, or the id of the one live cluster/VM named ``ref``."""
    if ref.isdigit():
        return int(ref)
    path = "/virtual-clusters" if kind == "cluster" else "/virtual-machines"
    for item in client.pages(path, {"name": ref}):
        if item["name"] == ref:
            return item["id"]
    raise CliError(f"{ref}: not found", EXIT_NOT_FOUND)


def catalog_id(client: Client, path: str, code: str) -> int:
    for entry in client.call("GET", path):
        if entry["code"] == code or str(entry["id"]) == code:
            return entry["id"]
    raise CliError(f"{code}: not found", EXIT_NOT_FOUND)


def wait(client: Client, op: dict, timeout: float, poll: float) -> dict:
    """Poll the operation until it is done, printing its progress to stderr; a failed
    operation (its error, or any failed item) is exit 1 with the rule's messages."""
    deadline = time.monotonic() + timeout
    last = ""
    while not op["done"]:
        if time.monotonic() > deadline:
            raise CliError(f"operation {op['id']}: still running after {timeout:g}s", EXIT_TIMEOUT)
        time.sleep(poll)
        op = client.call("GET", f"/operations/{op['id']}")
        items = op["items"]
        finished = sum(item["status"] != "PENDING" for item in items)
        progress = f"operation {op['id']} {op['kind']}: {finished}/{len(items)}"
        if progress != last:
            print(progress, file=sys.stderr)
            last = progress
    failures = [
        f"{item['target_name']}: {item['error']['message']}"
        for item in op["items"]
        if item["status"] == "FAILED" and item["error"]
    ]
    if op.get("error"):
        failures.insert(0, op["error"]["message"])
    if failures:
        raise CliError("\n".join(failures), EXIT_REFUSED)
    return op


def accepted(client: Client, args, op: dict) -> None:
    """What a change answered (its Operation), waited for if ``--wait``."""
    if getattr(args, "wait", False):
        op = wait(client, op, args.timeout, args.poll)
    show(args, op, "op")


# ---------------------------------------------------------------------------------------------
# Commands


def cluster_command(client: Client, args) -> None:
    action = args.action
    if action == "list":
        query = {
            "status": args.status,
            "zone": args.zone,
            "instance_type": args.instance_type,
            "name": args.name,
        }
        return show(args, list(client.pages("/virtual-clusters", query)), "cluster")
    if action == "create":
        body = {
            "name": args.name,
            "zone_id": catalog_id(client, "/zones", args.zone),
            "instance_type_id": catalog_id(client, "/instance-types", args.instance_type),
            "fabric_type": args.fabric,
        }
        return accepted(client, args, client.call("POST", "/virtual-clusters", body))
    cid = resolve(client, "cluster", args.cluster)
    path = f"/virtual-clusters/{cid}"
    if action == "get":
        return show(args, client.call("GET", path), "cluster")
    if action == "hostfile":
        return print(client.call("GET", f"{path}/hostfile", raw=True), end="")
    if action == "launch":
        plan = client.call("GET", f"{path}/launch")
        if args.output == "json":
            return show(args, plan, "launch")
        print("\n".join(f"export {k}={v}" for k, v in plan["nccl_env"].items()))
        return print("\n".join(f"# {r['vm_name']}\n{r['command']}" for r in plan["ranks"]))
    if action == "rename":
        return show(args, client.call("PATCH", path, {"name": args.name}), "cluster")
    if action == "delete":
        return accepted(client, args, client.call("DELETE", path))
    if action == "start":
        return accepted(client, args, client.call("POST", f"{path}:start", {}))
    if action == "stop":
        body = {"stop_members": args.stop_members}
        return accepted(client, args, client.call("POST", f"{path}:stop", body))
    if action == "attach":
        vm_ids = [resolve(client, "vm", vm) for vm in args.vms]
        return accepted(client, args, client.call("POST", f"{path}/members", {"vm_ids": vm_ids}))
    if action == "detach":
        vm_id = resolve(client, "vm", args.vm)
        return accepted(client, args, client.call("DELETE", f"{path}/members/{vm_id}"))
    raise CliError(f"unknown action {action}", EXIT_USAGE)


def vm_command(client: Client, args) -> None:
    action = args.action
    if action == "list":
        query = {
            "status": args.status,
            "zone": args.zone,
            "name": args.name,
            "cluster": resolve(client, "cluster", args.cluster) if args.cluster else None,
        }
        return show(args, list(client.pages("/virtual-machines", query)), "vm")
    if action == "create":
        body = {
            "name": args.name,
            "zone_id": catalog_id(client, "/zones", args.zone),
            "instance_type_id": catalog_id(client, "/instance-types", args.instance_type),
            "billing_type": args.billing,
            "disaster_recovery": args.dr,
            "count": args.count,
            "cluster_id": resolve(client, "cluster", args.cluster) if args.cluster else None,
        }
        return accepted(client, args, client.call("POST", "/virtual-machines", body))
    path = f"/virtual-machines/{resolve(client, 'vm', args.vm)}"
    if action == "get":
        return show(args, client.call("GET", path), "vm")
    if action == "delete":
        return accepted(client, args, client.call("DELETE", path))
    return accepted(client, args, client.call("POST", f"{path}:{action}", {}))


def op_command(client: Client, args) -> None:
    op = client.call("GET", f"/operations/{int(args.id)}")
    if args.action == "wait":
        op = wait(client, op, args.timeout, args.poll)
    show(args, op, "op")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="vc",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument("--url", help="portal URL (VC_URL)")
    root.add_argument("--token", help="API token vcp_… (VC_TOKEN)")
    root.add_argument("--output", "-o", choices=("table", "json"), default="table")
    root.add_argument("--lang", choices=("ko", "en"), help="message language (VC_LANG)")
    groups = root.add_subparsers(dest="group", required=True)

    def action(sub, name, *positional, waits=False, filters=(), placed=False):
        """A subcommand: positional arguments, optional ``filters``, the zone and type of
        something created (``placed``), and ``--wait`` for the changes."""
        p = sub.add_parser(name)
        for arg in positional:
            p.add_argument(arg, nargs="+" if arg == "vms" else None)
        for flag in filters:
            p.add_argument(flag)
        if placed:
            p.add_argument("--zone", required=True, help="zone code, e.g. kr-central-1a")
            p.add_argument("--instance-type", required=True, help="instance type code")
        if waits:
            p.add_argument("--wait", action="store_true", help="wait until the operation is done")
            p.add_argument("--timeout", type=float, default=600)
            p.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
        return p

    cluster = groups.add_parser("cluster").add_subparsers(dest="action", required=True)
    action(cluster, "list", filters=("--status", "--zone", "--instance-type", "--name"))
    action(cluster, "get", "cluster")
    action(cluster, "create", "name", waits=True, placed=True).add_argument(
        "--fabric", required=True, choices=("INFINIBAND", "ROCE_V2")
    )
    action(cluster, "rename", "cluster", "name")
    action(cluster, "delete", "cluster", waits=True)
    action(cluster, "start", "cluster", waits=True)
    action(cluster, "stop", "cluster", waits=True).add_argument(
        "--stop-members", action="store_true", help="stop running members first"
    )
    action(cluster, "attach", "cluster", "vms", waits=True)
    action(cluster, "detach", "cluster", "vm", waits=True)
    action(cluster, "hostfile", "cluster")
    action(cluster, "launch", "cluster")

    vm = groups.add_parser("vm").add_subparsers(dest="action", required=True)
    action(vm, "list", filters=("--status", "--zone", "--name", "--cluster"))
    action(vm, "get", "vm")
    p = action(vm, "create", "name", waits=True, placed=True)
    p.add_argument("--billing", default="ON_DEMAND", choices=("ON_DEMAND", "RESERVED", "SPOT"))
    p.add_argument("--dr", action="store_true", help="disaster recovery VM")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--cluster", help="attach the new VMs to this cluster")
    for name in ("start", "stop", "delete"):
        action(vm, name, "vm", waits=True)

    op = groups.add_parser("op").add_subparsers(dest="action", required=True)
    action(op, "get", "id")
    action(op, "wait", "id", waits=True)
    return root


def settings(args) -> tuple[str, str, str]:
    path = Path(os.environ.get("VC_CONFIG", Path.home() / ".config" / "vc" / "config.json"))
    config = {}
    if path.is_file():
        try:
            config = json.loads(path.read_text())
        except ValueError as error:
            raise CliError(f"{path}: {error}", EXIT_USAGE) from None
    url = args.url or os.environ.get("VC_URL") or config.get("url")
    token = args.token or os.environ.get("VC_TOKEN") or config.get("token")
    language = args.lang or os.environ.get("VC_LANG") or config.get("lang") or "ko"
    if not url or not token:
        raise CliError("set VC_URL and VC_TOKEN (or --url/--token, or a config file)", EXIT_USAGE)
    return url, token, language


COMMANDS = {"cluster": cluster_command, "vm": vm_command, "op": op_command}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        client = Client(*settings(args))
        COMMANDS[args.group](client, args)
    except CliError as error:
        print(f"vc: {error}", file=sys.stderr)
        return error.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
