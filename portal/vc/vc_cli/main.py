"""``vc``'s command line: the parser (each subcommand wired to its function by
``set_defaults(func=…)``), the configuration, and the one place every failure becomes its
documented exit code."""

import argparse
import json
import os
import stat
import sys
from pathlib import Path

import vc_cli
from vc_cli import commands
from vc_cli.http import EXIT_SERVER, EXIT_USAGE, Client, CliError
from vc_cli.output import emit
from vc_cli.text import say, use

# The options of every command, accepted before or after the subcommand.
GLOBAL_DEFAULTS = {"url": None, "token": None, "output": "table", "lang": None}
CONFIG_KEYS = ("url", "token", "lang")


def global_options() -> argparse.ArgumentParser:
    """A parent parser: with ``SUPPRESS`` defaults, a subcommand's parser does not overwrite
    what was given before the subcommand."""
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--url", help="portal URL (VC_URL)")
    common.add_argument("--token", help="API token vcp_… (VC_TOKEN)")
    common.add_argument("--output", "-o", choices=("table", "json"), help="default: table")
    common.add_argument("--lang", choices=("ko", "en"), help="message language (VC_LANG)")
    return common


def parser() -> argparse.ArgumentParser:
    common = global_options()
    root = argparse.ArgumentParser(
        prog="vc",
        description=vc_cli.__doc__.split("\n\n")[0].replace("``", ""),
        epilog=vc_cli.__doc__.split("\n\n", 1)[1].replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    groups = root.add_subparsers(dest="group", required=True)

    def action(sub, name, func, *positional, waits=False, filters=(), placed=False):
        """A subcommand running ``func``: positional arguments, optional ``filters``, the zone
        and type of something created (``placed``), and ``--wait`` for the changes."""
        p = sub.add_parser(name, parents=[common])
        p.set_defaults(func=func)
        for arg in positional:
            kind = int if arg == "id" else str  # an operation id is a number: else usage
            p.add_argument(arg, nargs="+" if arg == "vms" else None, type=kind)
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

    c = commands
    cluster = groups.add_parser("cluster", parents=[common]).add_subparsers(
        dest="action", required=True
    )
    action(
        cluster, "list", c.cluster_list, filters=("--status", "--zone", "--instance-type", "--name")
    )
    action(cluster, "get", c.cluster_get, "cluster")
    cluster_create_options(
        action(cluster, "create", c.cluster_create, "name", waits=True, placed=True)
    )
    action(cluster, "rename", c.cluster_rename, "cluster", "name")
    action(cluster, "delete", c.cluster_delete, "cluster", waits=True)
    action(cluster, "start", c.cluster_start, "cluster", waits=True)
    action(cluster, "stop", c.cluster_stop, "cluster", waits=True).add_argument(
        "--stop-members", action="store_true", help="stop running members first"
    )
    action(cluster, "attach", c.cluster_attach, "cluster", "vms", waits=True)
    action(cluster, "detach", c.cluster_detach, "cluster", "vm", waits=True)
    action(cluster, "replace", c.cluster_replace, "cluster", "member", waits=True).add_argument(
        "spare", nargs="?", help="the VM taking its place (left out: the cluster's best spare)"
    )
    action(cluster, "spares", c.cluster_spares, "cluster")
    action(cluster, "spare-add", c.cluster_spare_add, "cluster", "vm", waits=True)
    action(cluster, "spare-remove", c.cluster_spare_remove, "cluster", "vm", waits=True)
    action(cluster, "policy", c.cluster_policy, "cluster", waits=True).add_argument(
        "--set", choices=("notify", "propose", "auto"), help="알림만, 교체 제안 or 자동 교체"
    )
    action(cluster, "validate", c.cluster_validate, "cluster", waits=True).add_argument(
        "--level", type=int, choices=(1, 2), default=1, help="dcgmi diag -r 1 (quick) or 2"
    )
    action(cluster, "validations", c.cluster_validations, "cluster").add_argument(
        "--limit", type=int, default=10, help="how many runs, newest first"
    )
    action(cluster, "hostfile", c.cluster_hostfile, "cluster")
    action(cluster, "launch", c.cluster_launch, "cluster")
    action(cluster, "straggler", c.cluster_straggler, "cluster")

    vm_commands(groups.add_parser("vm", parents=[common]), action)
    ssh_key_commands(groups.add_parser("ssh-key", parents=[common]), action)
    webhook_commands(groups.add_parser("webhook", parents=[common]), action)
    op = groups.add_parser("op", parents=[common]).add_subparsers(dest="action", required=True)
    action(op, "get", c.op_get, "id")
    action(op, "wait", c.op_wait, "id", waits=True)
    action(op, "cancel", c.op_cancel, "id")
    return root


def vm_commands(group: argparse.ArgumentParser, action) -> None:
    """``vc vm list|get|create|start|stop|delete`` under ``group``."""
    vm = group.add_subparsers(dest="action", required=True)
    c = commands
    action(vm, "list", c.vm_list, filters=("--status", "--zone", "--name", "--cluster"))
    action(vm, "get", c.vm_get, "vm")
    p = action(vm, "create", c.vm_create, "name", waits=True, placed=True)
    p.add_argument("--billing", default="ON_DEMAND", choices=("ON_DEMAND", "RESERVED", "SPOT"))
    p.add_argument("--dr", action="store_true", help="disaster recovery VM")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--cluster", help="attach the new VMs to this cluster")
    ssh_key_option(p, "an SSH key (name or id) the new VMs' login user vc gets; repeat for more")
    action(vm, "start", c.vm_power("start"), "vm", waits=True)
    action(vm, "stop", c.vm_power("stop"), "vm", waits=True)
    action(vm, "delete", c.vm_delete, "vm", waits=True)


def ssh_key_option(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--ssh-key", action="append", default=[], dest="ssh_keys", help=text)


def cluster_create_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fabric", required=True, choices=("INFINIBAND", "ROCE_V2"))
    ssh_key_option(
        p,
        "an SSH key (name or id) every member's login user vc gets beside its own, from the"
        " member's next start; repeat for more",
    )


def ssh_key_commands(group: argparse.ArgumentParser, action) -> None:
    """``vc ssh-key list|create|delete`` under ``group``, each made by ``parser``'s ``action``."""
    key = group.add_subparsers(dest="action", required=True)
    action(key, "list", commands.ssh_key_list)
    p = action(key, "create", commands.ssh_key_create)
    p.add_argument("--name", required=True)
    p.add_argument("--file", required=True, help="a public key file, e.g. ~/.ssh/id_ed25519.pub")
    action(key, "delete", commands.ssh_key_delete, "key")


def webhook_commands(group: argparse.ArgumentParser, action) -> None:
    """``vc webhook list|create|delete|test|deliveries`` under ``group``."""
    hook = group.add_subparsers(dest="action", required=True)
    action(hook, "list", commands.webhook_list)
    p = action(hook, "create", commands.webhook_create, "name")
    p.add_argument("endpoint", metavar="URL", help="http:// or https:// URL the events go to")
    p.add_argument(
        "--event",
        action="append",
        default=[],
        dest="events",
        help="an event type, e.g. cluster.status_changed; repeat for more (default: every type)",
    )
    action(hook, "delete", commands.webhook_delete, "webhook")
    action(hook, "test", commands.webhook_test, "webhook")
    action(hook, "deliveries", commands.webhook_deliveries, "webhook")


def read_config(path: Path) -> dict:
    """The config file as a dict of strings ({} when there is none); a file others may read
    while it holds a token gets a warning on stderr, as ssh gives for a key."""
    try:
        if not path.is_file():
            return {}
        raw, mode = path.read_bytes(), path.stat().st_mode
    except OSError as error:
        reason = error.strerror or error
        raise CliError(say("config_unreadable", path=path, reason=reason), EXIT_USAGE) from None
    try:
        config = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise CliError(say("config_unreadable", path=path, reason=error), EXIT_USAGE) from None
    if not isinstance(config, dict) or any(
        not isinstance(config.get(key, ""), str) for key in CONFIG_KEYS
    ):
        raise CliError(say("config_shape", path=path), EXIT_USAGE)
    if config.get("token") and mode & (stat.S_IRWXG | stat.S_IRWXO):
        emit(
            f"vc: {say('config_open', path=path, mode=oct(stat.S_IMODE(mode))[2:].zfill(4))}",
            err=True,
        )
    return config


def settings(args) -> tuple[str, str, str]:
    default = Path.home() / ".config" / "vc" / "config.json"
    config = read_config(Path(os.environ.get("VC_CONFIG") or default))
    url = args.url or os.environ.get("VC_URL") or config.get("url")
    token = args.token or os.environ.get("VC_TOKEN") or config.get("token")
    language = use(args.lang or os.environ.get("VC_LANG") or config.get("lang"))
    if not url or not token:
        raise CliError(say("no_settings"), EXIT_USAGE)
    return url, token, language


def main(argv: list[str] | None = None) -> int:
    """Run one command; every failure is a message on stderr and its exit code, never a
    traceback."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as done:  # --help (0) or a usage error (2), already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    for name, default in GLOBAL_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    use(args.lang or os.environ.get("VC_LANG"))
    try:
        args.func(Client(*settings(args)), args)
    except CliError as error:
        emit(f"vc: {error}", err=True)
        return error.code
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as error:
        # An answer of another shape than the portal's (a proxy, another service).
        emit(f"vc: {say('bad_answer', detail=f'{type(error).__name__}: {error}')}", err=True)
        return EXIT_SERVER
    return 0


if __name__ == "__main__":
    sys.exit(main())
