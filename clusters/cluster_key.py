"""A cluster's SSH key pair (``clusters.models.ClusterKey``): made anew at every start, sealed
at rest, handed only to its members' agents (``clusters.peers``).

The pair is ed25519 (``cryptography``), the private key in OpenSSH's format, as
``ssh-keygen -t ed25519`` writes it. It is sealed with Fernet (AES-128-CBC and HMAC-SHA256)
under a key derived from ``SECRET_KEY`` by HKDF, so a copy of the database alone does not give
the members' key away; a portal whose ``SECRET_KEY`` changed cannot open it and hands out
none until the cluster's next start makes a new one. Nothing here logs, renders or audits
the private key.
"""

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from clusters.models import ClusterKey, VirtualCluster

SEAL_CONTEXT = b"vc-portal cluster ssh key v1"


def _fernet() -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=SEAL_CONTEXT).derive(
        settings.SECRET_KEY.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def seal(private_key: str) -> str:
    return _fernet().encrypt(private_key.encode()).decode()


def unseal(sealed: str) -> str | None:
    """The private key, or None if it was sealed under another ``SECRET_KEY``."""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        return None


def new_pair(comment: str) -> tuple[str, str]:
    """(OpenSSH private key, ``ssh-ed25519 <base64> <comment>``)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, f"{public.decode()} {comment}"


def rotate(cluster: VirtualCluster) -> ClusterKey:
    """Replace the cluster's pair with a new one (a start, with the cluster row locked: two
    starts cannot interleave their keys). The old pair stops being handed out at once."""
    private, public = new_pair(f"vc-cluster-{cluster.pk}")
    row, _created = ClusterKey.objects.update_or_create(
        cluster=cluster,
        defaults={
            "public_key": public,
            "sealed_private_key": seal(private),
            "generation": cluster.generation,
        },
    )
    return row
