"""What each ``vc`` subcommand does: one function per command, ``(client, args) -> None``,
wired to its parser by ``set_defaults(func=…)`` in ``vc_cli.main``."""

import time

from vc_cli.http import (
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_SERVER,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Client,
    CliError,
)
from vc_cli.output import COLUMNS, emit, show, table
from vc_cli.text import say

FAILED_VERDICTS = ("BAD", "NO_ANSWER")


# ---------------------------------------------------------------------------------------------
# Names and waiting


LISTS = {
    "cluster": "/virtual-clusters",
    "vm": "/virtual-machines",
    "ssh-key": "/ssh-keys",
    "webhook": "/webhooks",
}
# A public key file is a line; what is read of a larger file is enough for the portal to
# refuse it by its size (16 KB), with its own words.
KEY_FILE_READ = 64 * 1024


def resolve(client: Client, kind: str, ref: str) -> int:
    """An id as given, or the id of the one live cluster/VM/SSH key named ``ref``."""
    if ref.isascii() and ref.isdigit():
        return int(ref)
    # The keys' and webhooks' lists have no filter.
    query = {} if kind in ("ssh-key", "webhook") else {"name": ref}
    for item in client.pages(LISTS[kind], query):
        if item["name"] == ref:
            return item["id"]
    raise CliError(say("not_found", ref=ref), EXIT_NOT_FOUND)


def catalog_id(client: Client, path: str, code: str) -> int:
    for entry in client.call("GET", path):
        if entry["code"] == code or str(entry["id"]) == code:
            return entry["id"]
    raise CliError(say("not_found", ref=code), EXIT_NOT_FOUND)


def wait(client: Client, op: dict, timeout: float, poll: float) -> dict:
    """Poll the operation until it is done, printing its progress to stderr; a failed
    operation (its error, or any failed item) is exit 1 with the rule's messages."""
    deadline = time.monotonic() + timeout
    last = ""
    while not op["done"]:
        if time.monotonic() > deadline:
            raise CliError(say("still_running", id=op["id"], timeout=timeout), EXIT_TIMEOUT)
        time.sleep(poll)
        op = client.call("GET", f"/operations/{op['id']}")
        items = op["items"]
        finished = sum(item["status"] != "PENDING" for item in items)
        progress = f"operation {op['id']} {op['kind']}: {finished}/{len(items)}"
        if progress != last:
            emit(progress, err=True)
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


def placed(client: Client, args) -> dict:
    """The zone and instance type of something created, by code."""
    return {
        "zone_id": catalog_id(client, "/zones", args.zone),
        "instance_type_id": catalog_id(client, "/instance-types", args.instance_type),
    }


def cluster_path(client: Client, args) -> str:
    return f"/virtual-clusters/{resolve(client, 'cluster', args.cluster)}"


def vm_path(client: Client, args) -> str:
    return f"/virtual-machines/{resolve(client, 'vm', args.vm)}"


# ---------------------------------------------------------------------------------------------
# vc cluster …


def filters(args, *names: str) -> dict:
    """The list's query: each filter option as given (``None``, left out, when not)."""
    return {name: getattr(args, name) for name in names}


def cluster_list(client: Client, args) -> None:
    query = filters(args, "status", "zone", "instance_type", "name")
    show(args, list(client.pages("/virtual-clusters", query)), "cluster")


def cluster_create(client: Client, args) -> None:
    body = {
        "name": args.name,
        **placed(client, args),
        "fabric_type": args.fabric,
        "ssh_key_ids": [resolve(client, "ssh-key", key) for key in args.ssh_keys],
    }
    accepted(client, args, client.call("POST", "/virtual-clusters", body))


def cluster_get(client: Client, args) -> None:
    show(args, client.call("GET", cluster_path(client, args)), "cluster")


def cluster_hostfile(client: Client, args) -> None:
    emit(client.call("GET", f"{cluster_path(client, args)}/hostfile", raw=True), end="")


def cluster_launch(client: Client, args) -> None:
    plan = client.call("GET", f"{cluster_path(client, args)}/launch")
    if args.output == "json":
        return show(args, plan, "launch")
    emit("\n".join(f"export {k}={v}" for k, v in plan["nccl_env"].items()))
    emit("\n".join(f"# {r['vm_name']}\n{r['command']}" for r in plan["ranks"]))


def cluster_straggler(client: Client, args) -> None:
    """The 메트릭 tab's straggler lines: who is slow, or that no member is."""
    found = client.call("GET", f"{cluster_path(client, args)}/straggler")
    if args.output == "json":
        return show(args, found, "straggler")
    emit("\n".join(found["lines"]))


def cluster_rename(client: Client, args) -> None:
    show(args, client.call("PATCH", cluster_path(client, args), {"name": args.name}), "cluster")


def cluster_delete(client: Client, args) -> None:
    accepted(client, args, client.call("DELETE", cluster_path(client, args)))


def cluster_start(client: Client, args) -> None:
    accepted(client, args, client.call("POST", f"{cluster_path(client, args)}:start", {}))


def cluster_stop(client: Client, args) -> None:
    body = {"stop_members": args.stop_members}
    accepted(client, args, client.call("POST", f"{cluster_path(client, args)}:stop", body))


def cluster_attach(client: Client, args) -> None:
    path = f"{cluster_path(client, args)}/members"
    vm_ids = [resolve(client, "vm", vm) for vm in args.vms]
    accepted(client, args, client.call("POST", path, {"vm_ids": vm_ids}))


def cluster_detach(client: Client, args) -> None:
    path = f"{cluster_path(client, args)}/members/{resolve(client, 'vm', args.vm)}"
    accepted(client, args, client.call("DELETE", path))


def cluster_replace(client: Client, args) -> None:
    member = resolve(client, "vm", args.member)
    spare = resolve(client, "vm", args.spare) if args.spare else None
    path = f"{cluster_path(client, args)}/members/{member}:replace"
    accepted(client, args, client.call("POST", path, {"spare_vm_id": spare}))


def cluster_spares(client: Client, args) -> None:
    show(args, list(client.pages(f"{cluster_path(client, args)}/spares", {})), "vm")


def cluster_spare_add(client: Client, args) -> None:
    body = {"vm_id": resolve(client, "vm", args.vm)}
    accepted(client, args, client.call("POST", f"{cluster_path(client, args)}/spares", body))


def cluster_spare_remove(client: Client, args) -> None:
    path = f"{cluster_path(client, args)}/spares/{resolve(client, 'vm', args.vm)}"
    accepted(client, args, client.call("DELETE", path))


def cluster_policy(client: Client, args) -> None:
    path = f"{cluster_path(client, args)}/policy"
    if args.set:
        return accepted(client, args, client.call("PUT", path, {"policy": args.set}))
    show(args, client.call("GET", path), "policy")


def run_row(run: dict) -> dict:
    """A validation run as one table row: its verdicts counted by label."""
    counts: dict[str, int] = {}
    for verdict in run["verdicts"]:
        counts[verdict["verdict_label"]] = counts.get(verdict["verdict_label"], 0) + 1
    summary = ", ".join(f"{label} {n}" for label, n in counts.items())
    seconds = run["seconds"]
    return dict(run, verdicts=summary, seconds=None if seconds is None else f"{seconds:.0f}")


def cluster_validations(client: Client, args) -> None:
    path = f"{cluster_path(client, args)}/validations"
    runs = client.call("GET", path, query={"page_size": args.limit})["items"]
    if args.output == "json":
        return show(args, runs, "run")
    emit(table([run_row(run) for run in runs], COLUMNS["run"]))


def cluster_validate(client: Client, args) -> None:
    """Start a run; with ``--wait``, wait for it and print each member's verdict and reasons
    (exit 1 if one is 불량 or 응답 없음)."""
    path = cluster_path(client, args)
    op = client.call("POST", f"{path}:validate", {"level": args.level})
    if not args.wait:
        return show(args, op, "op")
    wait(client, op, args.timeout, args.poll)
    runs = client.call("GET", f"{path}/validations", query={"page_size": 50})["items"]
    run = next((r for r in runs if r["operation_id"] == op["id"]), None)
    if run is None:  # pragma: no cover - the run is the Operation's own record
        raise CliError(say("no_run", id=op["id"]), EXIT_SERVER)
    if args.output == "json":
        show(args, run, "run")
    else:
        emit(table(run["verdicts"], COLUMNS["verdict"]))
    failed = [v["vm_name"] for v in run["verdicts"] if v["verdict"] in FAILED_VERDICTS]
    if failed:
        raise CliError(", ".join(failed), EXIT_REFUSED)


# ---------------------------------------------------------------------------------------------
# vc vm …, vc op …


def vm_list(client: Client, args) -> None:
    query = filters(args, "status", "zone", "name")
    query["cluster"] = resolve(client, "cluster", args.cluster) if args.cluster else None
    show(args, list(client.pages("/virtual-machines", query)), "vm")


def vm_create(client: Client, args) -> None:
    body = {
        "name": args.name,
        **placed(client, args),
        "billing_type": args.billing,
        "disaster_recovery": args.dr,
        "count": args.count,
        "cluster_id": resolve(client, "cluster", args.cluster) if args.cluster else None,
        "ssh_key_ids": [resolve(client, "ssh-key", key) for key in args.ssh_keys],
    }
    accepted(client, args, client.call("POST", "/virtual-machines", body))


def vm_get(client: Client, args) -> None:
    show(args, client.call("GET", vm_path(client, args)), "vm")


def vm_delete(client: Client, args) -> None:
    accepted(client, args, client.call("DELETE", vm_path(client, args)))


def vm_power(verb: str):
    """``vc vm start`` / ``vc vm stop``: the VM's ``:start`` / ``:stop``."""

    def command(client: Client, args) -> None:
        accepted(client, args, client.call("POST", f"{vm_path(client, args)}:{verb}", {}))

    return command


# ---------------------------------------------------------------------------------------------
# vc ssh-key …


def ssh_key_list(client: Client, args) -> None:
    show(args, list(client.pages("/ssh-keys", {})), "ssh_key")


def ssh_key_create(client: Client, args) -> None:
    """Register the key of ``--file`` (one line of a ``.pub`` file) as ``--name``; the portal
    checks it and says what is wrong."""
    try:
        with open(args.file, "rb") as file:
            text = file.read(KEY_FILE_READ + 1).decode("utf-8", "replace")
    except OSError as error:
        reason = error.strerror or error
        raise CliError(say("file_unreadable", path=args.file, reason=reason), EXIT_USAGE) from None
    body = {"name": args.name, "public_key": text}
    show(args, client.call("POST", "/ssh-keys", body), "ssh_key")


def ssh_key_delete(client: Client, args) -> None:
    client.call("DELETE", f"/ssh-keys/{resolve(client, 'ssh-key', args.key)}")


# ---------------------------------------------------------------------------------------------
# vc webhook …


def webhook_list(client: Client, args) -> None:
    show(args, list(client.pages("/webhooks", {})), "webhook")


def webhook_create(client: Client, args) -> None:
    """Register the URL as ``name`` for the ``--event`` types (none given: every type);
    the answer's secret is printed this once, and said so on stderr."""
    body = {"name": args.name, "url": args.endpoint, "events": args.events or None}
    show(args, client.call("POST", "/webhooks", body), "webhook_created")
    emit(say("webhook_secret"), err=True)


def webhook_delete(client: Client, args) -> None:
    client.call("DELETE", f"/webhooks/{resolve(client, 'webhook', args.webhook)}")


def webhook_test(client: Client, args) -> None:
    """Queue a ``webhook.test`` event; ``vc webhook deliveries`` shows how it went."""
    sent = client.call("POST", f"/webhooks/{resolve(client, 'webhook', args.webhook)}:test", {})
    show(args, sent if args.output == "json" else [_delivery_row(sent)], "delivery")


def webhook_deliveries(client: Client, args) -> None:
    """The webhook's deliveries, newest first; the table names each one's last attempt."""
    path = f"/webhooks/{resolve(client, 'webhook', args.webhook)}/deliveries"
    rows = list(client.pages(path, {}))
    show(args, rows if args.output == "json" else [_delivery_row(r) for r in rows], "delivery")


def _delivery_row(delivery: dict) -> dict:
    log = delivery.get("attempt_log") or []
    last = log[0] if log else None
    shown = None
    if last is not None:
        shown = f"{last['status_code'] or last['error']} ({last['duration_ms']} ms)"
    return delivery | {"last_attempt": shown}


def op_get(client: Client, args) -> None:
    show(args, client.call("GET", f"/operations/{args.id}"), "op")


def op_cancel(client: Client, args) -> None:
    show(args, client.call("POST", f"/operations/{args.id}:cancel", {}), "op")


def op_wait(client: Client, args) -> None:
    op = client.call("GET", f"/operations/{args.id}")
    show(args, wait(client, op, args.timeout, args.poll), "op")
