"""Public keys the SSH key tests register, made by ``ssh-keygen`` (public halves only), with
the fingerprints ``ssh-keygen -lf`` printed for them; and RSA keys of any size, built."""

import base64

ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKTE4hXECEcBG+DhpjqKKhzlxUTLwYxPjfNf1+MCWHV9 me@laptop"
)
ED25519_FINGERPRINT = "SHA256:6YMlrNPZ78bh+FaeqiJ7QDrElqhBMmjU9eUlRyNUxnQ"
ED25519_OTHER = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINfD+mTpK+vynI74sq84IKQTMYa9sqmd3zp+c2uPyj8A second"
)
ED25519_OTHER_FINGERPRINT = "SHA256:Lj6yHUjwI+GFLGWG+9VrIpAwfo4Rv3V9K5mfjcTG7EA"
RSA_2048 = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCvBvzQnc8g7En+IdKpq4jf2RQ/Q4nsFI6IXH5fSkaXMNE3GJYkiR0"
    "4osXSTP15r10k0nqZjhPeLFQEuTecr5ReJYjbuc9Fh93k5cVpSrn1mAZJGx2+qfR5fibF1vs9XiDszq0AC/LL64ObYx"
    "+xuPHKrdNhDmnfjXa1XfuVz7E7Wus27D/MpQGpKbk1m09x6zhHhexAOAd6systNdnEND3rOk6XS1hwnCI9Tqlf0D9Mm"
    "xIbFNYvbClQTHvPkdawxRduMH4RxnPYNbpzFQneIXZoTnodgKwLf3rI8PXO+ORbBprJbm69jZbioDDjAvcm57r694VOF"
    "Wek4ZbAo9ozpMEl"
)
RSA_2048_FINGERPRINT = "SHA256:tVdGmPOsHmLgSEOREqkng/jIZydZep+ETh3K5/9lH1U"
RSA_1024 = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDR+iPCxvAxrWf5MIG/r8EK4OktNka7nIJpZHNT6EhHF76nsaVrYq7"
    "sg7/aIV0acwnEzoNwvswnpEHpgOfSFXXk/5LE11hSRxz+EXPmP1MGLvirxOo+nPALVXUPqoWL8GCNFg9J+tsYx3teDVC"
    "PXVXM45TevgmutugWNiB7fQ5IfQ== root@vm"
)
ECDSA = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBCvHAwMJFa0zhFkGr/Ui"
    "XtMo73VoGBTqpYhGMO7tpecDosMnB7P/LH4INwSLA71ORJv7sRFvbi4C1KS1h+xvHRs= root@vm"
)


def string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def mpint(value: int) -> bytes:
    data = value.to_bytes(value.bit_length() // 8 + 1, "big")
    return string(data)


def rsa_key(bits: int, exponent: int = 65537) -> str:
    """An ``ssh-rsa`` line whose modulus has ``bits`` bits (not a real key: its size is what
    is checked)."""
    modulus = (1 << (bits - 1)) | 1
    blob = string(b"ssh-rsa") + mpint(exponent) + mpint(modulus)
    return f"ssh-rsa {base64.b64encode(blob).decode()} built"


def line(blob: bytes, key_type: str = "ssh-ed25519") -> str:
    return f"{key_type} {base64.b64encode(blob).decode()}"
