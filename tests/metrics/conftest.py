"""Fixtures for the metrics tests: a VM with a token, a poster for the ingest endpoint."""

import time

import orjson
import pytest
from django.urls import reverse

from metrics import services
from vms.models import VmStatus


def sample(ts=None, **overrides):
    """A valid sample of an 8-GPU training VM at ``ts`` (default: now)."""
    values = {
        "ts": time.time() if ts is None else ts,
        "cpu_util": 31.5,
        "mem_util": 42.0,
        "gpu_util": 96.0,
        "gpu_mem_util": 78.5,
        "net_rx": 5.5e7,
        "net_tx": 6.0e6,
        "fabric_rx": 2.0e10,
        "fabric_tx": 2.1e10,
    }
    values.update(overrides)
    return values


@pytest.fixture
def running_vm(world):
    return world.vm("metrics-node", status=VmStatus.RUNNING)


@pytest.fixture
def token(running_vm):
    _vm, plaintext = services.rotate_token(running_vm.pk, actor=None)
    return plaintext


@pytest.fixture
def post(client):
    """``post(token, payload)``: POST to the ingest endpoint (payload: object or raw bytes)."""

    def _post(token, payload, **headers):
        body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        if token is not None:
            headers.setdefault("Authorization", f"Bearer {token}")
        return client.generic(
            "POST",
            reverse("metrics:ingest"),
            body,
            content_type="application/json",
            headers=headers,
        )

    return _post
