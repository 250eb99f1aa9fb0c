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

``vc cluster validate --wait`` prints each member's verdict; it exits 1 when a member is
judged 불량 (bad) or 응답 없음 (no answer), 0 when all are 정상 or 점검 필요.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from portal.cli_http import (
    EXIT_AUTH,
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_SERVER,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Client,
    CliError,
)
from portal.cli_output import COLUMNS, show, table

# The exit codes, the client and the table are this module's interface (scripts and tests).
__all__ = [
    "EXIT_AUTH",
    "EXIT_NOT_FOUND",
    "EXIT_REFUSED",
    "EXIT_SERVER",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "CliError",
    "Client",
    "main",
    "table",
]
FAILED_VERDICTS = ("BAD", "NO_ANSWER")


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
    if action == "replace":
        member, spare = resolve(client, "vm", args.member), resolve(client, "vm", args.spare)
        body = {"spare_vm_id": spare}
        return accepted(client, args, client.call("POST", f"{path}/members/{member}:replace", body))
    if action == "validate":
        return validate(client, args, path)
    if action == "validations":
        runs = client.call("GET", f"{path}/validations", query={"page_size": args.limit})["items"]
        if args.output == "json":
            return show(args, runs, "run")
        return print(table([run_row(run) for run in runs], COLUMNS["run"]))
    raise CliError(f"unknown action {action}", EXIT_USAGE)


def run_row(run: dict) -> dict:
    """A validation run as one table row: its verdicts counted by label."""
    counts: dict[str, int] = {}
    for verdict in run["verdicts"]:
        counts[verdict["verdict_label"]] = counts.get(verdict["verdict_label"], 0) + 1
    summary = ", ".join(f"{label} {n}" for label, n in counts.items())
    seconds = run["seconds"]
    return dict(run, verdicts=summary, seconds=None if seconds is None else f"{seconds:.0f}")


def validate(client: Client, args, path: str) -> None:
    """Start a run; with ``--wait``, wait for it and print each member's verdict and reasons
    (exit 1 if one is 불량 or 응답 없음)."""
    op = client.call("POST", f"{path}:validate", {"level": args.level})
    if not args.wait:
        return show(args, op, "op")
    wait(client, op, args.timeout, args.poll)
    runs = client.call("GET", f"{path}/validations", query={"page_size": 50})["items"]
    run = next((r for r in runs if r["operation_id"] == op["id"]), None)
    if run is None:  # pragma: no cover - the run is the Operation's own record
        raise CliError(f"operation {op['id']}: no validation run", EXIT_SERVER)
    if args.output == "json":
        show(args, run, "run")
    else:
        print(table(run["verdicts"], COLUMNS["verdict"]))
    failed = [v["vm_name"] for v in run["verdicts"] if v["verdict"] in FAILED_VERDICTS]
    if failed:
        raise CliError(", ".join(failed), EXIT_REFUSED)


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
    action(cluster, "replace", "cluster", "member", "spare", waits=True)
    action(cluster, "validate", "cluster", waits=True).add_argument(
        "--level", type=int, choices=(1, 2), default=1, help="dcgmi diag -r 1 (quick) or 2"
    )
    action(cluster, "validations", "cluster").add_argument(
        "--limit", type=int, default=10, help="how many runs, newest first"
    )
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
