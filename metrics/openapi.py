"""The OpenAPI 3.1 document of the agents' endpoints (``GET /api/metrics/openapi.json``).

Apart from the REST API's (``/api/v1/openapi.json``): another caller (a VM's agent, with its
``vcm_`` metrics token, never a ``vcp_`` API token) and plain views rather than ninja's. What
can drift is built from what the code checks: a sample's fields and their bounds
(``METRIC_FIELDS``, ``GPU_FIELDS``, ``PORT_FIELDS``), the batch limits (``metrics.conf``),
each refusal's status and code (``metrics.errors``), the tools a job result may name
(``toolparse.PARSERS``). Every refusal is the REST API's problem document
(``portal.foundation.problems``); tests/metrics/test_agent_api.py holds the answers to it.
"""

from http import HTTPStatus

from metrics import conf, errors
from metrics.ingest.batch import ALL_KEYS, TOKEN_PREFIX
from metrics.models import GPU_FIELDS, MAX_DEVICES, METRIC_FIELDS, PORT_FIELDS
from metrics.vm_agent import VERSION
from metrics.vm_agent.hostkeys import MAX_KEYS
from metrics.vm_agent.toolparse import PARSERS
from portal.foundation.problems import PROBLEM_TYPE

REF = "#/components/schemas/"
# The same members as the REST API's Problem (portal.api.schemas.Problem).
PROBLEM = {
    "description": "RFC 9457 problem details (``application/problem+json``).",
    "properties": {
        "type": {"default": "about:blank", "title": "Type", "type": "string"},
        "title": {"title": "Title", "type": "string"},
        "status": {"title": "Status", "type": "integer"},
        "code": {"title": "Code", "type": "string"},
        "detail": {"title": "Detail", "type": "string"},
        "field": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": None,
            "title": "Field",
        },
        "permission": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": None,
            "title": "Permission",
        },
    },
    "required": ["title", "status", "code", "detail"],
    "title": "Problem",
    "type": "object",
}
# What the request guard (portal.api.guard) answers for any path under /api/.
GUARD = {405: ("method_not_allowed",), 411: ("length_required",), 413: ("body_too_large",)}
UNAUTHORIZED = {401: (errors.Unauthorized.code,)}
RATE_LIMITED = {429: (errors.RateLimited.code,)}
BODY = {
    400: ("bad_gzip", "malformed_json", "not_finite"),
    413: (errors.TooLarge.code,),
    415: (errors.UnsupportedEncoding.code,),
}
# The job endpoints' own refusals (metrics.views.jobs.JOB_REFUSALS).
JOB_RESULT = {400: ("invalid",), 404: ("not_found",), 409: ("finished",)}
# The cluster endpoint's: the VM is in no cluster (metrics.views.cluster).
NOT_IN_CLUSTER = {errors.NotInCluster.status: (errors.NotInCluster.code,)}
# Refusals of one endpoint of their own, never the ingest's.
NOT_INGEST = (errors.NotInCluster,)


def _ingest_refusals() -> dict:
    """Every code of ``metrics.errors`` by its status: what the ingest can answer."""
    found: dict[int, set] = {}
    stack = [errors.IngestError]
    while stack:
        cls = stack.pop()
        if cls not in NOT_INGEST:
            found.setdefault(cls.status, set()).add(cls.code)
        stack.extend(cls.__subclasses__())
    return {status: tuple(sorted(codes)) for status, codes in found.items()}


def _merge(*tables: dict) -> dict:
    merged: dict[int, set] = {}
    for table in tables:
        for status, codes in table.items():
            merged.setdefault(status, set()).update(codes)
    return {status: sorted(codes) for status, codes in sorted(merged.items())}


def _number(nullable: bool, lowest: float, highest: float) -> dict:
    kind = ["number", "null"] if nullable else "number"
    return {"type": kind, "minimum": lowest, "maximum": highest}


def _device(index_key: str, fields) -> dict:
    """A GPU or fabric port of a sample: its index and any of its fields (absent: null)."""
    return {
        "type": "object",
        "required": [index_key],
        "additionalProperties": False,
        "properties": {
            index_key: {"type": "integer", "minimum": 0, "maximum": MAX_DEVICES - 1},
            **{name: _number(True, low, high) for name, _null, low, high in fields},
        },
    }


def _schemas() -> dict:
    most = conf.get("METRICS_MAX_BATCH_SAMPLES")
    devices = {"type": ["array", "null"], "maxItems": MAX_DEVICES}
    sample = {
        "type": "object",
        "additionalProperties": False,
        "required": ["ts", *(name for name, nullable, *_r in METRIC_FIELDS if not nullable)],
        "properties": {
            "ts": {"type": "number", "description": "Unix seconds (UTC)."},
            **{name: _number(null, low, high) for name, null, low, high in METRIC_FIELDS},
            "gpus": {**devices, "items": {"$ref": REF + "Gpu"}},
            "ports": {**devices, "items": {"$ref": REF + "Port"}},
        },
    }
    vm = {"type": "integer", "description": "The token's VM, if given (else 403)."}
    batch_items = {"type": "array", "minItems": 1, "maxItems": most}
    return {
        "Problem": PROBLEM,
        "Gpu": _device("gpu", GPU_FIELDS),
        "Port": _device("port", PORT_FIELDS),
        "Sample": sample,
        "Samples": {
            "type": "object",
            "additionalProperties": False,
            "required": ["samples"],
            "properties": {"vm": vm, "samples": {**batch_items, "items": {"$ref": REF + "Sample"}}},
        },
        "Rows": {
            "description": "The compact form the agent sends: field names once, then one "
            "array per sample in their order (the fields of Sample; ``ts`` and the "
            "required ones present).",
            "type": "object",
            "additionalProperties": False,
            "required": ["fields", "rows"],
            "properties": {
                "vm": vm,
                "fields": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"type": "string", "enum": list(ALL_KEYS)},
                },
                "rows": {**batch_items, "items": {"type": "array"}},
            },
        },
        "Stored": _object(stored={"type": "integer", "minimum": 1}),
        "Vm": _object(vm={"type": "integer"}),
        "Job": _object(
            id={"type": "integer"},
            kind={"type": "string"},
            params={"type": "object"},
            timeout={"type": "integer", "description": "Seconds."},
        ),
        "Jobs": _object(jobs={"type": "array", "items": {"$ref": REF + "Job"}}),
        "JobResult": {
            "type": "object",
            "required": ["job", "outputs"],
            "properties": {
                "job": {"type": "integer", "minimum": 1},
                "outputs": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["tool", "exit_code"],
                        "properties": {
                            "tool": {"type": "string", "enum": sorted(PARSERS)},
                            "stdout": {"type": "string"},
                            "exit_code": {"type": "integer"},
                            "device": {"type": "string"},
                            "stage": {"type": "string"},
                            "figures": {"type": "object"},
                        },
                    },
                },
                "seconds": {"type": ["number", "null"], "minimum": 0, "maximum": 86400},
            },
        },
        "JobStatus": _object(status={"type": "string"}),
        **_cluster_schemas(),
    }


def _cluster_schemas() -> dict:
    """The member's view of its cluster (``clusters.peers.member_view``) and the host keys'
    report (``vms.host_keys``)."""
    text_or_null = {"type": ["string", "null"]}
    host_key = _object(
        key={"type": "string", "description": "``type base64``"},
        fingerprint={"type": "string", "description": "``SHA256:…`` as ssh-keygen -l"},
    )
    member = _object(
        id={"type": "integer"},
        name={"type": "string"},
        hostname={**text_or_null, "description": "null: a lower rank has the same hostname"},
        rank={"type": "integer", "minimum": 0},
        address={**text_or_null, "description": "fabric IP, else the management IP"},
        fabric_ip=text_or_null,
        private_ip=text_or_null,
        slots={"type": "integer", "minimum": 1},
        host_keys={"type": "array", "items": {"$ref": REF + "HostKey"}},
    )
    return {
        "HostKey": host_key,
        "Member": member,
        "ClusterView": _object(
            cluster=_object(
                id={"type": "integer"}, name={"type": "string"}, status={"type": "string"}
            ),
            rank={"type": "integer", "minimum": 0},
            nnodes={"type": "integer", "minimum": 1},
            master_addr=text_or_null,
            master_port={"type": "integer"},
            nproc_per_node={"type": "integer", "minimum": 1},
            members={"type": "array", "items": {"$ref": REF + "Member"}},
            ssh=_object(
                user={"type": "string"},
                public_key=text_or_null,
                private_key={
                    **text_or_null,
                    "description": "OpenSSH; only while the cluster runs and the VM starts or runs",
                },
            ),
            version={"type": "string", "description": "also the ETag"},
        ),
        "HostKeys": {
            "type": "object",
            "additionalProperties": False,
            "required": ["host_keys"],
            "properties": {
                "host_keys": {
                    "type": "array",
                    "maxItems": MAX_KEYS,
                    "items": {"type": "string", "description": "``type base64 [comment]``"},
                }
            },
        },
        "HostKeysChanged": _object(changed={"type": "boolean"}),
    }


def _object(**properties) -> dict:
    return {"type": "object", "required": list(properties), "properties": properties}


def _json(schema: str) -> dict:
    return {"application/json": {"schema": {"$ref": REF + schema}}}


def _responses(ok: str, refusals: dict) -> dict:
    responses: dict = {"200": {"description": "OK", "content": _json(ok)}}
    for status, codes in refusals.items():
        response: dict = {
            "description": f"{HTTPStatus(status).phrase}: {', '.join(codes)}",
            "content": {PROBLEM_TYPE: {"schema": {"$ref": REF + "Problem"}}},
        }
        if status == 401:
            response["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
        if status == 429:
            response["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
        responses[str(status)] = response
    return responses


def _operation(summary: str, ok: str, refusals: dict, body=None, gzip=False, method="post") -> dict:
    headers = [("User-Agent", "``vc-metrics-agent/<version>``: the portal keeps the version")]
    if gzip:
        headers.append(("Content-Encoding", "``gzip`` or absent"))
    headers.append(("Accept-Language", "the language of ``detail``: ko (default) or en"))
    operation: dict = {
        "summary": summary,
        "parameters": [
            {"name": name, "in": "header", "description": text, "schema": {"type": "string"}}
            for name, text in headers
        ],
        "responses": _responses(ok, _merge(GUARD, refusals)),
    }
    if body:
        operation["requestBody"] = {"required": True, "content": body}
    return {method: operation}


def _cluster_operation() -> dict:
    operation = _operation(
        "What this VM's cluster is: its rank, its peers, the cluster's SSH key",
        "ClusterView",
        _merge(UNAUTHORIZED, RATE_LIMITED, NOT_IN_CLUSTER),
        method="get",
    )
    get = operation["get"]
    get["parameters"].append(
        {
            "name": "If-None-Match",
            "in": "header",
            "description": "the ETag of the view the agent has: 304 while it is current",
            "schema": {"type": "string"},
        }
    )
    get["responses"]["200"]["headers"] = {"ETag": {"schema": {"type": "string"}}}
    get["responses"]["304"] = {"description": "Not Modified: the view is the one named"}
    return operation


def document() -> dict:
    batch = {"oneOf": [{"$ref": REF + "Samples"}, {"$ref": REF + "Rows"}]}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Virtual Cluster agent API",
            "version": VERSION,
            "description": (
                "What a VM's metrics agent (vc-metrics-agent) calls: its samples, its "
                "클러스터 검증 jobs, its cluster's members and its host keys. "
                f"Authorization: Bearer {TOKEN_PREFIX}… (the VM page's 메트릭 에이전트 token). "
                "Errors are RFC 9457 application/problem+json, as under /api/v1; "
                "Accept-Language: en for English."
            ),
        },
        "components": {
            "securitySchemes": {"MetricsToken": {"type": "http", "scheme": "bearer"}},
            "schemas": _schemas(),
        },
        "security": [{"MetricsToken": []}],
        "paths": {
            "/api/metrics/ingest": _operation(
                "Store a batch of samples, all or nothing",
                "Stored",
                _ingest_refusals(),
                body={"application/json": {"schema": batch}},
                gzip=True,
            ),
            "/api/metrics/check": _operation("The VM this token writes for", "Vm", UNAUTHORIZED),
            "/api/metrics/jobs/next": _operation(
                "Claim this VM's jobs due now", "Jobs", _merge(UNAUTHORIZED, RATE_LIMITED)
            ),
            "/api/metrics/jobs/result": _operation(
                "Report a job's raw output",
                "JobStatus",
                _merge(UNAUTHORIZED, RATE_LIMITED, BODY, JOB_RESULT),
                body=_json("JobResult"),
                gzip=True,
            ),
            "/api/metrics/cluster": _cluster_operation(),
            "/api/metrics/host-keys": _operation(
                "Report the guest's SSH host keys (replaces the VM's)",
                "HostKeysChanged",
                _merge(UNAUTHORIZED, RATE_LIMITED, BODY, {400: ("invalid",)}),
                body=_json("HostKeys"),
                gzip=True,
            ),
        },
    }
