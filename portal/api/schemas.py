"""The JSON shapes of the API (snake_case, integer ids, ISO 8601 UTC times).

Labels (``status_label``, ``kind_label``) and error messages are rendered in the caller's
language when the response is built; codes never change with the language.

A resource's shape is written once, here: an ``Out`` schema reads the rows a handler found
(model instances) by their attributes and serializes them, in pydantic's compiled core — no
dict is built by hand beside it, and no per-row Python pass (ninja's ``Schema`` resolves
every attribute in Python: 7 ms for 256 rows).
"""

from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, TypeVar

from django.utils import translation
from ninja import Field, Schema
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo, field_validator

from clusters.models import ClusterStatus
from vms.models import VmStatus

# Validation context keys: the language labels are shown in (read once per response, not
# per row), and whether the reader may read the clusters a VM names.
LANGUAGE = "language"
CLUSTERS_VISIBLE = "clusters_visible"


def _query_int(value):
    """A query string's integer is decimal digits only (not ``1.0``, ``+1``, ``1_000``)."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("decimal digits")
    return value


def _query_bool(value):
    """A query string's flag is ``true`` or ``false`` (not ``yes``, ``on``, ``1``)."""
    if isinstance(value, str):
        if value not in ("true", "false"):
            raise ValueError("true or false")
        return value == "true"
    return value


QueryInt = Annotated[int, BeforeValidator(_query_int)]
QueryBool = Annotated[bool, BeforeValidator(_query_bool)]


class Out(BaseModel):
    """A response shape, read from the attributes of a row (``from_attributes``)."""

    model_config = ConfigDict(from_attributes=True)


Shape = TypeVar("Shape", bound=Out)


def read(schema: type[Shape], data: Any, **context: Any) -> Shape:
    """``data`` (a row, or a dict holding rows) read by ``schema`` in one pass, labels in the
    active language; ``context`` answers what a field asks of the reader
    (``CLUSTERS_VISIBLE``). A handler returns it and ninja serializes it as it is."""
    return schema.model_validate(data, context={LANGUAGE: translation.get_language(), **context})


def labels_of(choices: Any) -> BeforeValidator:
    """What makes a ``*_label`` field of a code: its label in the response's language
    (translated once per language, not per row; a code the choices do not know is shown as
    it is)."""

    @lru_cache(maxsize=8)
    def table(language: str | None) -> dict[str, str]:
        with translation.override(language):
            return {value: str(text) for value, text in choices.choices}

    def to_label(code: str, info: ValidationInfo) -> str:
        context = info.context or {}
        language = context[LANGUAGE] if LANGUAGE in context else translation.get_language()
        return table(language).get(code, code)

    return BeforeValidator(to_label)


class ErrorOut(Out):
    """A stored error (a cluster's or an item's ``last_error``) as its code and message."""

    code: str
    message: str


class Problem(Schema):
    """RFC 9457 problem details (``application/problem+json``)."""

    type: str = "about:blank"
    title: str
    status: int
    code: str
    detail: str
    field: str | None = None
    permission: str | None = None


class ZoneOut(Schema):
    id: int
    code: str
    name: str


class OfferingOut(Schema):
    zone_id: int
    zone: str
    fabrics: list[str]


class InstanceTypeOut(Schema):
    id: int
    code: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    vcpu: int
    memory_gib: int
    offerings: list[OfferingOut]


class Placed(Out):
    """What clusters and VMs share: a named thing of a project, in a zone, of a type, with a
    status (code, and label in the caller's language) and the last error of its last step.
    A row comes with its zone's and type's codes annotated (``zone_code``, ``type_code``)."""

    id: int
    project_id: int
    name: str
    zone_id: int
    zone: str = Field(validation_alias="zone_code")
    instance_type_id: int
    instance_type: str = Field(validation_alias="type_code")
    status: str
    status_label: str
    last_error: ErrorOut | None
    created_at: datetime


class ClusterOut(Placed):
    # A cluster row comes annotated with member_count and running_member_count too.
    status_label: Annotated[str, labels_of(ClusterStatus), Field(validation_alias="status")]
    fabric_type: str
    member_count: int
    running_member_count: int
    status_changed_at: datetime


class VmOut(Placed):
    status_label: Annotated[str, labels_of(VmStatus), Field(validation_alias="status")]
    billing_type: str
    disaster_recovery: bool
    cluster_id: int | None
    private_ip: str | None
    fabric_address: str

    @field_validator("cluster_id")
    @classmethod
    def _cluster_told(cls, value: int | None, info: ValidationInfo) -> int | None:
        """Which cluster a VM is in is the cluster's to tell (as on the console's VM list):
        null unless the context says the reader may read clusters."""
        return value if (info.context or {}).get(CLUSTERS_VISIBLE) else None


class OperationItemOut(Schema):
    vm_id: int | None
    target_name: str
    status: str
    error: ErrorOut | None
    finished_at: datetime | None


class OperationOut(Schema):
    id: int
    kind: str
    kind_label: str
    cluster_id: int | None
    done: bool
    created_at: datetime
    finished_at: datetime | None
    items: list[OperationItemOut]
    error: ErrorOut | None


class ClusterPage(Out):
    items: list[ClusterOut]
    next_page_token: str | None


class VmPage(Out):
    items: list[VmOut]
    next_page_token: str | None


class OperationPage(Schema):
    items: list[OperationOut]
    next_page_token: str | None


class LaunchRank(Schema):
    node_rank: int
    vm_id: int
    vm_name: str
    private_ip: str | None
    command: str


class LaunchOut(Schema):
    master_addr: str
    master_port: int
    nproc_per_node: int
    nnodes: int
    nccl_env: dict[str, str]
    ranks: list[LaunchRank]


class StrictIn(Schema):
    """A request body, typed strictly: an id or a count is a JSON integer (``true`` or
    ``"1"`` is refused, never read as 1), a flag is ``true``/``false`` (never ``"yes"``)."""

    model_config = ConfigDict(strict=True)


class ClusterCreateIn(StrictIn):
    name: str = Field(max_length=200)
    zone_id: int
    instance_type_id: int
    fabric_type: str


class RenameIn(StrictIn):
    name: str = Field(max_length=200)


class StopIn(StrictIn):
    stop_members: bool = False


class AttachIn(StrictIn):
    vm_ids: list[int] = Field(min_length=1, max_length=500)


class VmCreateIn(StrictIn):
    name: str = Field(max_length=200)
    zone_id: int
    instance_type_id: int
    billing_type: str
    disaster_recovery: bool = False
    count: int = 1
    cluster_id: int | None = None


class ValidateIn(StrictIn):
    level: int = 1  # dcgmi diag -r 1 (quick) or 2 (about 2 minutes); the service decides


class ReplaceIn(StrictIn):
    spare_vm_id: int


class ReasonOut(Schema):
    """Why a member got its verdict: a code and its figures, and the words for them."""

    code: str
    level: str
    params: dict
    message: str


class VerdictOut(Schema):
    vm_id: int | None
    vm_name: str
    verdict: str
    verdict_label: str
    reasons: list[ReasonOut]


class CheckOut(Schema):
    """One tool run on one member (``peers``: the other members its figure is about)."""

    id: int
    kind: str
    kind_label: str
    phase: int
    vm_id: int | None
    vm_name: str
    peers: list[int]
    status: str
    status_label: str
    seconds: float | None
    summary: str
    figures: dict
    raw: list[dict] | None = None


class ValidationOut(Schema):
    operation_id: int
    cluster_id: int | None
    actor: str | None
    level: int
    done: bool
    created_at: datetime
    finished_at: datetime | None
    seconds: float | None
    thresholds: dict
    verdicts: list[VerdictOut]
    checks: list[CheckOut]


class ValidationPage(Schema):
    items: list[ValidationOut]
    next_page_token: str | None
