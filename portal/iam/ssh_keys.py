"""A project's SSH public keys (docs/rules.md#ssh-keys): parse one, register it, delete it,
and which of them a VM being created may carry.

A key is read as OpenSSH writes it (``ssh-keygen``'s ``.pub``: ``type base64 [comment]``,
one line) with the standard library: the base64 is the SSH wire format (RFC 4253 §6.6) — a
string naming the type, then for ``ssh-ed25519`` a string of the 32-byte key (RFC 8709), for
``ssh-rsa`` the mpints ``e`` and ``n`` (its size is ``n``'s bits). Only those two types are
taken, and nothing an ``authorized_keys`` line could carry besides the key: no options
(``command=``, ``from=``), no second key, no line break. What is kept is the key normalised
to ``type base64 [comment]`` and the SHA-256 fingerprint as ``ssh-keygen -l`` prints it.
"""

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from portal.foundation.audit import attempt
from portal.foundation.errors import RuleViolation
from portal.foundation.errors.ssh_keys import (
    MAX_KEY_BYTES,
    RSA_MAX_BITS,
    RSA_MIN_BITS,
    SshKeyDuplicate,
    SshKeyLineBreak,
    SshKeyMalformed,
    SshKeyMany,
    SshKeyNameTaken,
    SshKeyNotFound,
    SshKeyOptions,
    SshKeyRefused,
    SshKeyRequired,
    SshKeyRsaBits,
    SshKeyTooLarge,
    SshKeyTypeMismatch,
    SshKeyTypeUnsupported,
)
from portal.foundation.kernel import (
    Actor,
    begin_create,
    parse_id,
    permission_refusal,
    raise_if,
    recorded_user,
    save_unique,
)
from portal.iam.permissions import Perm
from portal.models import Project, SshKey, readable

ED25519, RSA = SshKey.KeyType.ED25519.value, SshKey.KeyType.RSA.value
ED25519_KEY_BYTES = 32
# What looks like a key type, accepted or not (ssh-dss, ecdsa-sha2-nistp256,
# sk-ssh-ed25519@openssh.com …): a word that is not one is an option or a comment.
KEY_TYPE_RE = re.compile(r"^(ssh|ecdsa|sk|rsa)-[A-Za-z0-9@._-]{1,60}$")
# Characters no key line holds: every C0 control but the tab (a separator), and DEL.
CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
BASE64_RE = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


@dataclass(frozen=True)
class ParsedKey:
    key_type: str
    blob: bytes
    comment: str
    bits: int

    @property
    def public_key(self) -> str:
        """The key as one ``authorized_keys`` line: ``type base64 [comment]``."""
        line = f"{self.key_type} {base64.b64encode(self.blob).decode()}"
        return f"{line} {self.comment}" if self.comment else line

    @property
    def fingerprint(self) -> str:
        """``SHA256:`` and the unpadded base64 of the blob's SHA-256 (``ssh-keygen -l``)."""
        digest = base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"


# ---------------------------------------------------------------------------------------------
# Reading a key


class _Wire:
    """The SSH wire format's strings and mpints, read in order from a key's blob."""

    def __init__(self, blob: bytes) -> None:
        self.blob, self.at = blob, 0

    def string(self) -> bytes:
        if self.at + 4 > len(self.blob):
            raise SshKeyMalformed()
        size = int.from_bytes(self.blob[self.at : self.at + 4], "big")
        start, self.at = self.at + 4, self.at + 4 + size
        if self.at > len(self.blob):
            raise SshKeyMalformed()
        return self.blob[start : self.at]

    def mpint(self) -> int:
        """A positive mpint (two's complement, big-endian: a set top bit is a negative)."""
        data = self.string()
        if not data or data[0] & 0x80:
            raise SshKeyMalformed()
        return int.from_bytes(data, "big")

    def end(self) -> None:
        if self.at != len(self.blob):
            raise SshKeyMalformed()


def _shown_type(word: str) -> str:
    """A type the user wrote, safe to show and store in a message (letters and ``@._-``)."""
    return re.sub(r"[^A-Za-z0-9@._-]", "?", word)[:60]


def _words(text: Any) -> list[str]:
    """The line's words, once its size, its line breaks and its key count are fine."""
    if not isinstance(text, str):
        raise SshKeyRequired()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise SshKeyTooLarge(size=size, max=MAX_KEY_BYTES)
    line = text.strip()  # a file's last newline, a paste's spaces
    if not line:
        raise SshKeyRequired()
    if CONTROL_RE.search(line):
        pasted = [row for row in line.splitlines() if row.strip()]
        if len(pasted) > 1 and all(row.split()[0] in (ED25519, RSA) for row in pasted):
            raise SshKeyMany()
        raise SshKeyLineBreak()
    return line.split()


def parse_public_key(text: Any) -> ParsedKey:
    """``text`` read as one public key (``SshKeyRefused``'s subclasses say why not)."""
    words = _words(text)
    stated = words[0]
    if stated not in (ED25519, RSA):
        if KEY_TYPE_RE.match(stated):
            raise SshKeyTypeUnsupported(type=_shown_type(stated))
        if any(KEY_TYPE_RE.match(word) for word in words[1:]):
            raise SshKeyOptions()
        raise SshKeyMalformed()
    if len(words) < 2 or not BASE64_RE.match(words[1]):
        raise SshKeyMalformed()
    comment = words[2:]
    if any(word in (ED25519, RSA) for word in comment):
        raise SshKeyMany()
    try:
        blob = base64.b64decode(words[1], validate=True)
    except (binascii.Error, ValueError):
        raise SshKeyMalformed() from None
    wire = _Wire(blob)
    actual = wire.string().decode("ascii", "replace")
    if actual != stated:
        raise SshKeyTypeMismatch(stated=stated, actual=_shown_type(actual))
    if stated == ED25519:
        if len(wire.string()) != ED25519_KEY_BYTES:
            raise SshKeyMalformed()
        bits = 256
    else:
        exponent, modulus = wire.mpint(), wire.mpint()
        if exponent < 3 or exponent % 2 == 0:
            raise SshKeyMalformed()
        bits = modulus.bit_length()
        if not RSA_MIN_BITS <= bits <= RSA_MAX_BITS:
            raise SshKeyRsaBits(min=RSA_MIN_BITS, max=RSA_MAX_BITS, bits=bits)
    wire.end()
    return ParsedKey(stated, blob, " ".join(comment), bits)


# ---------------------------------------------------------------------------------------------
# The rules and their preflights


def public_key_refusal(text: Any) -> RuleViolation | None:
    """Whether ``text`` is one accepted public key (``parse_public_key``'s refusal, or None)."""
    try:
        parse_public_key(text)
    except SshKeyRefused as refusal:
        return refusal
    return None


def create_refusal(project: Project, name: str, key: ParsedKey) -> RuleViolation | None:
    """A name no other key of the project has, and a key the project has not registered yet
    (under any name)."""
    keys = SshKey.objects.filter(project=project)
    if keys.filter(name=name).exists():
        return SshKeyNameTaken()
    same = keys.filter(fingerprint=key.fingerprint).values_list("name", flat=True).first()
    return SshKeyDuplicate(name=same) if same is not None else None


def preflight_create(actor: Actor, project: Project) -> RuleViolation | None:
    return permission_refusal(actor, Perm.SSH_KEY_CREATE, project)


def preflight_delete(actor: Actor, key: SshKey) -> RuleViolation | None:
    return permission_refusal(actor, Perm.SSH_KEY_DELETE, key)


def chosen_keys(actor: Actor, project: Project, key_ids: Iterable[object] | None) -> list[SshKey]:
    """The keys ``key_ids`` names among ``project``'s that ``actor`` may read, in id order;
    an id naming none of them (another project's key, a deleted one, not an id) is
    ``SshKeyNotFound``, as a lookup outside the readable rows is everywhere."""
    wanted = list(key_ids or ())
    if not wanted:
        return []
    ids = {parse_id(value) for value in wanted}
    if None in ids:
        raise SshKeyNotFound()
    keys = list(
        readable(actor, Perm.SSH_KEY_READ, SshKey)
        .filter(project=project, pk__in=ids)
        .order_by("pk")
    )
    if len(keys) != len(ids):
        raise SshKeyNotFound()
    return keys


# ---------------------------------------------------------------------------------------------
# User actions


def _about(att: Any, key: SshKey) -> None:
    """The audit event names the key and its fingerprint (a key belongs to no cluster)."""
    att.target_id, att.target_name, att.project_id = key.pk, key.name, key.project_id
    att.message = key.fingerprint


def create_ssh_key(*, actor: Actor, project: Project, name: Any, public_key: Any) -> SshKey:
    """Register a public key in ``project`` under ``name`` (the name rule of clusters and
    VMs); a key refused is not saved, and every attempt is audited."""
    with attempt("ssh_key.create", actor=actor, target_type="ssh_key") as att:
        checked = begin_create(att, actor, Perm.SSH_KEY_CREATE, project, name)
        key = parse_public_key(public_key)
        raise_if(create_refusal(project, checked, key))
        row = SshKey(
            project=project,
            name=checked,
            public_key=key.public_key,
            key_type=key.key_type,
            bits=key.bits,
            fingerprint=key.fingerprint,
            created_by=recorded_user(actor),
        )
        save_unique(row, SshKeyNameTaken)
        _about(att, row)
    return row


def delete_ssh_key(key_id: object, *, actor: Actor) -> SshKey:
    """Delete a key: the VMs that carried it no longer get it in their seed from their next
    start on (a guest drops it from its ``authorized_keys`` then). A key the actor may not
    read is not found before anything is attempted (as a page's lookup is: nothing to audit);
    one they may read but not delete is refused, audited."""
    keys = readable(actor, Perm.SSH_KEY_READ, SshKey)
    keys.get_or_404(key_id)
    with attempt("ssh_key.delete", actor=actor, target_type="ssh_key") as att:
        key = keys.select_for_update().get_or_404(key_id)
        _about(att, key)
        raise_if(preflight_delete(actor, key))
        key.delete()
    return key
