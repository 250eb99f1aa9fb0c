"""Members know each other: the agent keeps this VM's cluster files as the portal describes
the cluster (``GET …/api/metrics/cluster``, with the agent's token), and reports the guest's
SSH host keys (``POST …/api/metrics/host-keys``).

What it writes, under a root that tests move (``ClusterFiles(root=…)``):

- ``/etc/hosts``: the peers' hostnames at their addresses, between this agent's two marker
  lines (everything else in the file is kept);
- ``/etc/vc/hostfile``: ``<address> slots=<n>`` per member in rank order, for ``mpirun``;
- ``/etc/vc/cluster.env``: ``VC_RANK``, ``VC_NNODES``, ``VC_MASTER_ADDR`` (rank 0's address),
  ``VC_MASTER_PORT``, ``VC_NPROC_PER_NODE``, ``VC_HOSTFILE`` — what ``torchrun`` takes;
- for the login user ``vc``, in ``~/.ssh`` (made 0700 if missing): ``id_vc_cluster`` (0600)
  and ``id_vc_cluster.pub``, the cluster's key pair; its public key in ``authorized_keys``
  between this agent's markers (the seed's block, ``vc-nocloud``'s, and the user's own lines
  are kept); ``known_hosts_vc_cluster``, the peers' host keys under their names and
  addresses; and a block of ``config`` that makes ``ssh <peer>`` use that key, that file and
  ``StrictHostKeyChecking accept-new`` (a peer whose host keys are not reported yet is
  accepted once; a reported key that does not match is refused).

Each file is written only when its content changes, whole, through a new file beside it
(created 0600-or-narrower with ``O_EXCL | O_NOFOLLOW``, given its mode and owner, flushed)
renamed over it: a reader sees the old file or the new one, never half, and never through a
symlink someone left in its place. The private key never reaches a log. A VM that leaves its
cluster (the portal answers 404 ``no_cluster``) has every file and block removed, and so has
a member whose cluster no longer runs its private key.

Standard library only, part of the agent's distribution; Python 3.9.
"""

import json
import logging
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from . import VERSION, hostkeys, transport

log = logging.getLogger("metrics.agent.cluster")
POLL_EVERY = 30.0
USER_AGENT = f"vc-metrics-agent/{VERSION} cluster"
LOGIN_USER = "vc"
BEGIN = "# vc-metrics-agent: cluster members (managed, rewritten when the cluster changes)"
END = "# vc-metrics-agent: end"
KEY_NAME = "id_vc_cluster"
KNOWN_HOSTS = "known_hosts_vc_cluster"
HOSTFILE = "etc/vc/hostfile"
ENV_FILE = "etc/vc/cluster.env"


# ---------------------------------------------------------------------------------------------
# Writing a file whole


def read_text(path: Path) -> Optional[str]:
    """The file's text, or None if there is none (a symlink counts as none: it is replaced,
    never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # novermin (bit flags)
    except (FileNotFoundError, OSError):
        return None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def write_file(path: Path, text: str, mode: int, owner=None) -> bool:
    """``text`` at ``path`` with ``mode`` (and ``owner``: (uid, gid)), atomically; nothing
    is written when the file already holds it with that mode and owner. Returns whether it
    wrote."""
    data = text.encode()
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not os.path.islink(path) and (info.st_mode & 0o7777) == mode:
        same_owner = owner is None or (info.st_uid, info.st_gid) == tuple(owner)
        if same_owner and read_text(path) == text:
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.vc-agent")
    try:
        partial.unlink()  # left by a write that stopped halfway
    except FileNotFoundError:
        pass
    # ``novermin``: vermin takes bit flags for a union type (``X | Y``, 3.10)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC  # novermin
    fd = os.open(partial, flags, mode & 0o600)
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
    return True


def remove_file(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def with_block(text: Optional[str], lines: list) -> str:
    """``text`` with this agent's block replaced by ``lines`` (none: the block removed), the
    rest kept as it was."""
    kept, inside = [], False
    for line in (text or "").splitlines():
        if line == BEGIN:
            inside = True
        elif line == END:
            inside = False
        elif not inside:
            kept.append(line)
    block = [BEGIN, *lines, END] if lines else []
    out = "\n".join(kept + block)
    return out + "\n" if out else ""


# ---------------------------------------------------------------------------------------------
# What the files say


def peers_of(view: dict) -> list:
    me = view["rank"]
    return [m for m in view["members"] if m["rank"] != me and m.get("address")]


def hosts_lines(view: dict) -> list:
    return [f"{m['address']}\t{m['hostname']}" for m in peers_of(view) if m.get("hostname")]


def hostfile_text(view: dict) -> str:
    lines = [
        f"{m.get('address') or m['name']} slots={m['slots']}  # rank {m['rank']} {m['name']}"
        for m in view["members"]
    ]
    return "".join(line + "\n" for line in lines)


def env_text(view: dict, root: Path) -> str:
    values = {
        "VC_CLUSTER": view["cluster"]["name"],
        "VC_RANK": view["rank"],
        "VC_NNODES": view["nnodes"],
        "VC_MASTER_ADDR": view.get("master_addr") or "",
        "VC_MASTER_PORT": view["master_port"],
        "VC_NPROC_PER_NODE": view["nproc_per_node"],
        "VC_HOSTFILE": str(root / HOSTFILE),
    }
    # Names, numbers and addresses the portal checked; quoted for a shell all the same.
    quoted = {key: str(value).replace("'", "") for key, value in values.items()}
    return "".join(f"{key}='{value}'\n" for key, value in quoted.items())


def peer_names(member: dict) -> list:
    names = [member.get("hostname"), member.get("address"), member.get("private_ip")]
    return list(dict.fromkeys(name for name in names if name))


def known_hosts_text(view: dict) -> str:
    lines = []
    for member in peers_of(view):
        for key in member.get("host_keys") or ():
            lines.append(f"{','.join(peer_names(member))} {key['key']}")
    return "".join(line + "\n" for line in lines)


def ssh_config_lines(view: dict) -> list:
    patterns = [name for member in peers_of(view) for name in peer_names(member)]
    if not patterns:
        return []
    return [
        f"Host {' '.join(dict.fromkeys(patterns))}",
        f"    User {view['ssh']['user']}",
        f"    IdentityFile ~/.ssh/{KEY_NAME}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile ~/.ssh/{KNOWN_HOSTS}",
        "    StrictHostKeyChecking accept-new",
    ]


# ---------------------------------------------------------------------------------------------
# The files


class ClusterFiles:
    """This VM's cluster files under ``root`` ("/" on a guest). The login user's are written
    with ``owner`` (uid, gid) in ``home``; by default the passwd entry of ``user`` (none: the
    SSH files are left alone and said so)."""

    def __init__(self, root="/", user=LOGIN_USER, home=None, owner=None):
        self.root = Path(root)
        self.user = user
        self.home: Optional[Path] = Path(home) if home is not None else None
        self.owner = owner
        if home is None:
            self.home, self.owner = self._account(user)

    def _account(self, user):
        try:
            import pwd

            entry = pwd.getpwnam(user)
        except (ImportError, KeyError):
            return None, None
        home = Path(entry.pw_dir)
        if str(self.root) != "/":
            home = self.root / home.relative_to("/")
        return home, (entry.pw_uid, entry.pw_gid)

    def at(self, relative: str) -> Path:
        return self.root / relative

    def apply(self, view: dict) -> list:
        """Write every file as ``view`` says; returns the paths written."""
        written = []
        hosts = self.at("etc/hosts")
        if write_file(hosts, with_block(read_text(hosts), hosts_lines(view)), 0o644):
            written.append(hosts)
        for relative, text in (
            (HOSTFILE, hostfile_text(view)),
            (ENV_FILE, env_text(view, self.root)),
        ):
            if write_file(self.at(relative), text, 0o644):
                written.append(self.at(relative))
        written += self._ssh(view)
        if written:
            log.info("cluster files updated: %s", ", ".join(str(p) for p in written))
        return written

    def clear(self) -> list:
        """Remove every file and block this agent wrote (the VM left its cluster)."""
        removed = []
        hosts = self.at("etc/hosts")
        current = read_text(hosts)
        if current is not None and write_file(hosts, with_block(current, []), 0o644):
            removed.append(hosts)
        for relative in (HOSTFILE, ENV_FILE):
            if remove_file(self.at(relative)):
                removed.append(self.at(relative))
        removed += self._ssh(None)
        if removed:
            log.info("cluster files removed: %s", ", ".join(str(p) for p in removed))
        return removed

    def _ssh_dir(self) -> Optional[Path]:
        """The user's ``~/.ssh``, made if missing; None if there is no such user or it is not
        the user's own directory (a symlink, another owner): nothing is written through it."""
        if self.home is None:
            log.warning("no user %s: the cluster's SSH files are not written", self.user)
            return None
        ssh = self.home / ".ssh"
        if not os.path.lexists(ssh):
            ssh.mkdir(mode=0o700, parents=True)
            if self.owner is not None:
                os.chown(ssh, *self.owner)
        info = os.lstat(ssh)
        if os.path.islink(ssh) or not ssh.is_dir():
            log.warning("%s is not a directory: the cluster's SSH files are not written", ssh)
            return None
        if self.owner is not None and info.st_uid != self.owner[0]:
            log.warning("%s is not %s's: the cluster's SSH files are not written", ssh, self.user)
            return None
        return ssh

    def _ssh(self, view: Optional[dict]) -> list:
        ssh = self._ssh_dir()
        if ssh is None:
            return []
        changed = []
        private = view["ssh"].get("private_key") if view else None
        public = view["ssh"].get("public_key") if view else None
        keyed = bool(private and public)
        for name, text, mode in (
            (KEY_NAME, private, 0o600),
            (KEY_NAME + ".pub", public and public + "\n", 0o644),
            (KNOWN_HOSTS, view and keyed and known_hosts_text(view), 0o644),
        ):
            if text:
                if write_file(ssh / name, text, mode, self.owner):
                    changed.append(ssh / name)
            elif remove_file(ssh / name):
                changed.append(ssh / name)
        for name, lines in (
            ("authorized_keys", [public] if keyed else []),
            ("config", ssh_config_lines(view) if view and keyed else []),
        ):
            path = ssh / name
            current = read_text(path)
            if current is None and not lines:
                continue
            if write_file(path, with_block(current, lines), 0o600, self.owner):
                changed.append(path)
        return changed


# ---------------------------------------------------------------------------------------------
# Talking to the portal


class ClusterSync:
    """Polls the member's view every ``every`` seconds and keeps the files as it says; sends
    the host keys when they are not yet reported or changed."""

    def __init__(self, ingest_url, token, files, *, ssh_dir=hostkeys.SSH_DIR, http_timeout=10.0):
        base = ingest_url.rsplit("/", 1)[0]
        self.view_url, self.keys_url = f"{base}/cluster", f"{base}/host-keys"
        self.token = token
        self.files = files
        self.ssh_dir = ssh_dir
        self.http_timeout = http_timeout
        self.etag: Optional[str] = None
        self.view: Optional[dict] = None
        self.reported: Optional[list] = None

    def _request(self, url, body=None, headers=None):
        request = urllib.request.Request(  # noqa: S310 - the portal's URL from the operator
            url,
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "User-Agent": USER_AGENT,
                **({"Content-Type": "application/json"} if body is not None else {}),
                **(headers or {}),
            },
        )
        return transport.urlopen(request, timeout=self.http_timeout)

    def report_host_keys(self) -> bool:
        keys = [key["key"] for key in hostkeys.read(self.ssh_dir)]
        if keys == self.reported:
            return False
        with self._request(self.keys_url, {"host_keys": keys}) as response:
            response.read()
        self.reported = keys
        return True

    def sync_once(self) -> str:
        """One poll: "changed", "same" (304, the files checked again), "left" (404: the VM
        is in no cluster, the files removed)."""
        headers = {"If-None-Match": self.etag} if self.etag and self.view else {}
        try:
            with self._request(self.view_url, headers=headers) as response:
                view = json.loads(response.read())
                self.etag = response.headers.get("ETag")
        except urllib.error.HTTPError as exc:
            if exc.code == 304 and self.view is not None:
                self.files.apply(self.view)  # a boot's seed may have rewritten /etc/hosts
                return "same"
            if exc.code == 404:
                self.etag = self.view = None
                self.files.clear()
                return "left"
            raise
        self.view = view
        self.files.apply(view)
        return "changed"

    def loop(self, stopping: threading.Event, every: float = POLL_EVERY) -> None:
        first = True
        while first or not stopping.wait(every):
            first = False
            for step in (self.report_host_keys, self.sync_once):
                try:
                    step()
                except urllib.error.HTTPError as exc:
                    log.warning("%s: portal answered %d", step.__name__, exc.code)
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    log.warning("%s failed: %s", step.__name__, exc)


def start(ingest_url, token, stopping, files=None, **options) -> threading.Thread:
    """The agent's hook: keep the cluster files on a daemon thread until ``stopping``."""
    sync = ClusterSync(ingest_url, token, files or ClusterFiles(), **options)
    thread = threading.Thread(target=sync.loop, args=(stopping,), daemon=True, name="cluster")
    thread.start()
    return thread
