"""Fixtures for the metrics tests: a VM with a token, a poster for the ingest endpoint."""

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from django.urls import reverse
from openapi_schema_validator import OAS31Validator

from metrics import openapi, services
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


def check_agent_answer(path, response):
    """The answer's status and content type are in the agents' OpenAPI document
    (``metrics.openapi``) for ``path``, and its body matches the schema given there."""
    document = openapi.document()
    documented = document["paths"][path]["post"]["responses"].get(str(response.status_code))
    assert documented, f"{path}: status {response.status_code} is not documented"
    content_type = response["Content-Type"].split(";")[0].strip()
    assert content_type in documented["content"], f"{path}: {content_type} is not documented"
    schema = documented["content"][content_type]["schema"]
    OAS31Validator({**schema, "components": document["components"]}).validate(
        orjson.loads(response.content)
    )


@pytest.fixture
def post(client):
    """``post(token, payload)``: POST to the ingest endpoint (payload: object or raw bytes);
    every answer is checked against the agents' OpenAPI document."""

    def _post(token, payload, **headers):
        body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        if token is not None:
            headers.setdefault("Authorization", f"Bearer {token}")
        response = client.generic(
            "POST",
            reverse("metrics:ingest"),
            body,
            content_type="application/json",
            headers=headers,
        )
        check_agent_answer("/api/metrics/ingest", response)
        return response

    return _post


@pytest.fixture(scope="session")
def agent_wheel(tmp_path_factory):
    """The agent's wheel, built by pip from metrics/vm_agent as ``build_guest_image`` builds
    it (from a copy: pip builds in place)."""
    out = tmp_path_factory.mktemp("wheel")
    source = Path(__file__).resolve().parents[2] / "metrics" / "vm_agent"
    subprocess.run(["cp", "-r", str(source), str(out / "src")], check=True)
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"),
            *("--disable-pip-version-check", "-w", str(out), str(out / "src")),
        ],
        check=True,
    )
    (path,) = out.glob("vc_metrics_agent-*.whl")
    return path
