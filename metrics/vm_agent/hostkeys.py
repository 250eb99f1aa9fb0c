"""A guest's SSH host keys: read from ``/etc/ssh/ssh_host_*_key.pub``, checked and
fingerprinted as ``ssh-keygen -l`` prints them (``SHA256:`` and the unpadded base64 of the
SHA-256 of the key's blob).

The agent reports them (``cluster``) so that a user can check the first connection to the VM
and its cluster's members can trust each other's hosts; the portal parses what it is sent
with the same function (``parse``), so the two never disagree on a fingerprint. Standard
library only, part of the agent's distribution.
"""

import base64
import binascii
import hashlib
import struct
from pathlib import Path

SSH_DIR = "/etc/ssh"
# The host key types OpenSSH makes (``ssh-keygen -A``); nothing else is a host key of ours.
TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
MAX_LINE = 16384  # bytes: an RSA key of 16,384 bits is about 2.8 KB
MAX_KEYS = len(TYPES)


class HostKeyError(ValueError):
    """A line that is not one public host key of a type in ``TYPES``."""


def fingerprint(blob: bytes) -> str:
    """``SHA256:<base64>`` of the key's blob, unpadded: what ``ssh-keygen -lf`` prints."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode()
    return "SHA256:" + digest.rstrip("=")


def parse(line: str) -> dict:
    """``{"type", "key", "fingerprint"}`` of one ``type base64 [comment]`` line (``key`` is
    ``type base64``, without the comment). ``HostKeyError`` unless the type is one of
    ``TYPES`` and the base64 is that type's SSH wire format (its first string the type)."""
    if not isinstance(line, str) or len(line) > MAX_LINE:
        raise HostKeyError("not a line of text of at most 16 KB")
    words = line.split()
    if len(words) < 2 or words[0] not in TYPES:
        raise HostKeyError("not a host key of a known type")
    try:
        blob = base64.b64decode(words[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HostKeyError("the key is not base64") from exc
    if len(blob) < 4:
        raise HostKeyError("the key is too short")
    (size,) = struct.unpack(">I", blob[:4])
    if blob[4 : 4 + size] != words[0].encode() or len(blob) <= 4 + size:
        raise HostKeyError("the key's data is not of the type it names")
    return {"type": words[0], "key": f"{words[0]} {words[1]}", "fingerprint": fingerprint(blob)}


def read(ssh_dir: str = SSH_DIR) -> list:
    """The host keys of ``ssh_dir`` (``ssh_host_*_key.pub``), one per type; a file that is
    not one host key is left out."""
    found: dict = {}
    for path in sorted(Path(ssh_dir).glob("ssh_host_*_key.pub")):
        try:
            key = parse(path.read_text(errors="replace").strip())
        except (OSError, HostKeyError):
            continue
        found.setdefault(key["type"], key)
    return [found[kind] for kind in TYPES if kind in found]
