"""How a delivery is signed, and how a receiver checks it (docs/webhooks.md), as Stripe's
are: ``v1=`` and the hex HMAC-SHA256, keyed by the webhook's secret, of the attempt's Unix
timestamp, a dot and the raw body. The timestamp is signed with the body, so a receiver that
refuses old timestamps refuses a captured request replayed later."""

import hashlib
import hmac

ID_HEADER = "X-VC-Event-Id"
TYPE_HEADER = "X-VC-Event"
TIMESTAMP_HEADER = "X-VC-Timestamp"
SIGNATURE_HEADER = "X-VC-Signature"
SCHEME = "v1"
# How old a timestamp a receiver should still take (what ``verify`` allows by default).
TOLERANCE_SECONDS = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-VC-Signature`` value of ``body`` sent at ``timestamp``."""
    signed = str(timestamp).encode() + b"." + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    header: str,
    *,
    now: float,
    tolerance: float = TOLERANCE_SECONDS,
) -> bool:
    """What a receiver does: the timestamp is recent and one of the header's ``v1=``
    signatures (comma-separated, for a secret being rolled) is the one made here, compared in
    constant time."""
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    if abs(now - int(timestamp)) > tolerance:
        return False
    expected = signature(secret, int(timestamp), body)
    return any(hmac.compare_digest(expected, part.strip()) for part in header.split(","))
