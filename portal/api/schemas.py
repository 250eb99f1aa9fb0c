"""The JSON shapes the API answers with (snake_case, integer ids, ISO 8601 UTC times); what
it takes (query values, request bodies) is in ``portal.api.inputs``.

Labels (``status_label``, ``kind_label``) and error messages are rendered in the caller's
language when the response is built; codes never change with the language.

A resource's shape is written once, here: an ``Out`` schema reads the rows a handler found
(model instances) by their attributes and serializes them, in pydantic's compiled core — no
dict is built by hand beside it, and no per-row Python pass (ninja's ``Schema`` resolves
every attribute in Python).
"""

from datetime import datetime
from functools import lru_cache
from operator import attrgetter
from types import SimpleNamespace
from typing import Annotated, Any, TypeVar

from django.utils import translation
from ninja import Field, Schema
from pydantic import (
    AliasPath,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from clusters.models import ClusterStatus, Operation, ReplacePolicy
from clusters.models.validation import ValidationJob, Verdict
from clusters.validation.display import job_summary
from clusters.validation.verdict import reason_text
from vms.models import VirtualMachine, VmHealth, VmStatus

# Validation context keys: the language labels are shown in (read once per response, not
# per row), and whether the reader may read clusters, and VMs (what a row names of them).
LANGUAGE = "language"
CLUSTERS_VISIBLE = "clusters_visible"
VMS_VISIBLE = "vms_visible"
SSH_KEYS_VISIBLE = "ssh_keys_visible"


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


def listed(value: Any) -> Any:
    """A related manager's rows (prefetched by the handler) as the list a field reads."""
    return list(value.all()) if hasattr(value, "all") else value


LISTED = BeforeValidator(listed)


def visible_to(key: str, hidden: Any = None) -> BeforeValidator:
    """What makes a field the reader's only where the context says they may read what it
    names (``key``): else it reads as ``hidden``, and nobody saying so is a no."""

    def shown(value: Any, info: ValidationInfo) -> Any:
        return value if (info.context or {}).get(key) else hidden

    return BeforeValidator(shown)


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


class ZoneOut(Out):
    id: int
    code: str
    name: str


class OfferingOut(Out):
    # A type's offering in one zone (``catalog.Offered``): the zone's code and its fabrics.
    zone_id: int
    zone: str = Field(validation_alias="zone_code")
    fabrics: list[str]


class InstanceTypeOut(Out):
    # ``offered``: set by the handler, the type's rows of OfferingOut.
    id: int
    code: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    vcpu: int
    memory_gib: int
    offerings: list[OfferingOut] = Field(validation_alias="offered")


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


class ClusterDetailOut(ClusterOut):
    # The SSH keys every member's seed installs beside its own (set by the handler): the
    # keys' readers' to know, as a VM's.
    ssh_key_ids: Annotated[list[int], visible_to(SSH_KEYS_VISIBLE, hidden=())] = Field(
        default_factory=list
    )


class PolicyOut(Out):
    # A cluster's 교체 정책 (docs/rules.md#a-clusters-policy), who set it and when.
    policy: str
    policy_label: Annotated[str, labels_of(ReplacePolicy), Field(validation_alias="policy")]
    set_by: str | None = Field(validation_alias="policy_set_by_name")
    set_at: datetime | None = Field(validation_alias="policy_set_at")


class VmRow(SimpleNamespace):
    """A VM's ``values()`` row (``vms.with_codes``), read as its model reads it:
    ``fabric_address`` and ``last_error`` are the model's own properties, over the row's
    columns (``error_params`` is fetched only with an error code)."""

    fabric_address = VirtualMachine.fabric_address
    health_evidence = VirtualMachine.health_evidence
    last_error = VirtualMachine.last_error
    error_params = property(attrgetter("stored_params"))


class VmOut(Placed):
    # Read from a VM or from its values() row (the lists fetch no model instances: 256 of
    # them cost more to build than the whole answer takes to validate and serialize).
    status_label: Annotated[str, labels_of(VmStatus), Field(validation_alias="status")]
    billing_type: str
    disaster_recovery: bool
    # Which cluster a VM is in is the cluster's to tell (as on the console's VM list).
    cluster_id: Annotated[int | None, visible_to(CLUSTERS_VISIBLE)]
    private_ip: str | None
    fabric_address: str
    # Its health (``vms.health``), apart from its status: the state, its label, what set it
    # (in the caller's language; "" while nothing has) and when (null: never changed).
    health: str
    health_label: Annotated[str, labels_of(VmHealth), Field(validation_alias="health")]
    health_evidence: str
    health_changed_at: datetime | None

    @model_validator(mode="before")
    @classmethod
    def _row(cls, row: Any) -> Any:
        return VmRow(**row) if isinstance(row, dict) else row


class VmDetailOut(VmOut):
    # The version the VM's metrics agent last reported (``metrics.agent_versions``); null
    # until one has. The detail's alone: the lists do not join the tokens.
    agent_version: Annotated[str | None, BeforeValidator(lambda v: v or None)] = None
    # The SSH keys its seed installs (set by the handler): the keys' readers' to know.
    ssh_key_ids: Annotated[list[int], visible_to(SSH_KEYS_VISIBLE, hidden=())] = Field(
        default_factory=list
    )


class SshKeyOut(Out):
    # A project's SSH public key (``portal.models.SshKey``), as registered: never changed.
    id: int
    project_id: int
    name: str
    key_type: str
    bits: int
    fingerprint: str
    public_key: str
    created_at: datetime


class SshKeyPage(Out):
    items: list[SshKeyOut]
    next_page_token: str | None


class WebhookOut(Out):
    # A project's webhook (``portal.webhooks.models.Webhook``): never its secret.
    id: int
    project_id: int
    name: str
    url: str
    events: list[str]
    created_at: datetime


class WebhookCreatedOut(WebhookOut):
    # The secret that signs its deliveries: in this answer only, never again.
    secret: str


class WebhookPage(Out):
    items: list[WebhookOut]
    next_page_token: str | None


class WebhookAttemptOut(Out):
    number: int
    at: datetime
    status_code: int | None
    error: str
    duration_ms: int


class WebhookDeliveryOut(Out):
    # One event sent to one webhook, with every attempt (newest first).
    id: int
    webhook_id: int
    event_id: str
    event_type: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    created_at: datetime
    attempt_log: Annotated[list[WebhookAttemptOut], LISTED]

    @field_validator("event_id", mode="before")
    @classmethod
    def _event_id(cls, value: Any) -> str:
        return str(value)


class WebhookDeliveryPage(Out):
    items: list[WebhookDeliveryOut]
    next_page_token: str | None


class OperationItemOut(Out):
    vm_id: int | None
    target_name: str
    status: str
    error: ErrorOut | None = Field(validation_alias="last_error")
    finished_at: datetime | None


class OperationOut(Out):
    # An Operation as its reader may see it: its cluster only to a cluster reader (a VM
    # role follows its VM's start without learning the VM's cluster), its items, which name
    # VMs, only to a VM reader (for a 검증 an item's status is the member's verdict). The
    # handler prefetches ``items``.
    id: int
    kind: str
    kind_label: Annotated[str, labels_of(Operation.Kind), Field(validation_alias="kind")]
    cluster_id: Annotated[int | None, visible_to(CLUSTERS_VISIBLE)]
    done: bool
    created_at: datetime
    finished_at: datetime | None
    items: Annotated[list[OperationItemOut], LISTED, visible_to(VMS_VISIBLE, hidden=())]
    error: ErrorOut | None = Field(validation_alias="last_error")
    # What started an automatic one (a 교체 정책's action): the evidence, the policy, who set
    # it and when. It names members: a VM reader's.
    evidence: Annotated[dict[str, Any], visible_to(VMS_VISIBLE, hidden={})] = Field(
        default_factory=dict
    )


class ClusterPage(Out):
    items: list[ClusterOut]
    next_page_token: str | None


class VmPage(Out):
    items: list[VmOut]
    next_page_token: str | None


class OperationPage(Out):
    items: list[OperationOut]
    next_page_token: str | None


class LaunchRank(Out):
    # A ``clusters.launch.Rank``: its member and its torchrun line.
    node_rank: int
    vm_id: int = Field(validation_alias=AliasPath("vm", "pk"))
    vm_name: str = Field(validation_alias=AliasPath("vm", "name"))
    private_ip: str | None = Field(validation_alias=AliasPath("vm", "private_ip"))
    command: str


class LaunchOut(Out):
    # A ``clusters.launch.LaunchPlan`` (one rank a member).
    master_addr: str
    master_port: int
    nproc_per_node: int
    nnodes: Annotated[int, BeforeValidator(len), Field(validation_alias="ranks")]
    nccl_env: Annotated[dict[str, str], BeforeValidator(dict)]
    ranks: list[LaunchRank]


class StragglerNamedOut(Out):
    # A ``metrics.storage.straggler.Named``.
    vm_name: str = Field(validation_alias="node")
    device: int | None = Field(description="GPU or port index; null: the member's own series")
    gap: float = Field(description="median gap to the cluster median: %p (GPU), % (port)")


class StragglerCriteriaOut(Out):
    gpu_points: float
    port_percent: float
    minutes: int


class StragglerOut(Out):
    """The 메트릭 tab's straggler lines (``metrics.storage.straggler.DeviceView``): null when
    the cluster has none; ``lines`` what the console says, in the caller's language."""

    straggler: StragglerNamedOut | None
    slow_port: StragglerNamedOut | None = Field(validation_alias="straggler_port")
    judged: bool
    criteria: StragglerCriteriaOut
    lines: list[str] = Field(description="headline — detail: the members', then the ports'")


class ReasonOut(Out):
    """Why a member got its verdict: a code and its figures, and the words for them."""

    code: str
    level: str
    params: dict
    message: str

    @model_validator(mode="before")
    @classmethod
    def _worded(cls, reason: Any) -> Any:
        return {**reason, "message": reason_text(reason)}


class VerdictOut(Out):
    vm_id: int | None
    vm_name: str
    verdict: str
    verdict_label: Annotated[str, labels_of(Verdict), Field(validation_alias="verdict")]
    reasons: list[ReasonOut]


class Summarized:
    """A validation job seen with its figures in a few words (``summary``); every other
    attribute is the job's."""

    def __init__(self, job: ValidationJob) -> None:
        self.job = job
        self.summary = job_summary(job)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.job, name)


class CheckOut(Out):
    """One tool run on one member (``peers``: the other members its figure is about)."""

    # The tools' raw output is read from ``raw_output``, annotated only when it is asked
    # for; the field is left out of the answer otherwise (the route excludes unset fields).

    id: int
    kind: str
    kind_label: Annotated[str, labels_of(ValidationJob.Kind), Field(validation_alias="kind")]
    phase: int
    vm_id: int | None
    vm_name: str
    peers: list[int]
    status: str
    status_label: Annotated[str, labels_of(ValidationJob.Status), Field(validation_alias="status")]
    seconds: float | None
    summary: str
    figures: dict
    raw: list[dict] | None = Field(None, validation_alias="raw_output")

    @model_validator(mode="before")
    @classmethod
    def _summarized(cls, job: Any) -> Any:
        return Summarized(job) if isinstance(job, ValidationJob) else job


# A run's own facts are on its Operation's ``validation`` (``ValidationRun``).
RUN_FINISHED = AliasPath("validation", "finished_at")


class ValidationOut(Out):
    # A 검증 run, read from its Operation: the handler fetches ``actor`` and ``validation``
    # with it, and prefetches the run's ``verdicts`` and ``jobs``.
    operation_id: int = Field(validation_alias="id")
    cluster_id: int | None
    actor: Annotated[str | None, BeforeValidator(lambda user: user and user.get_username())]
    level: int = Field(validation_alias=AliasPath("validation", "level"))
    done: Annotated[
        bool, BeforeValidator(lambda at: at is not None), Field(validation_alias=RUN_FINISHED)
    ]
    created_at: datetime
    finished_at: datetime | None = Field(validation_alias=RUN_FINISHED)
    seconds: float | None = Field(validation_alias=RUN_FINISHED)
    thresholds: dict = Field(validation_alias=AliasPath("validation", "thresholds"))
    verdicts: Annotated[list[VerdictOut], LISTED] = Field(
        validation_alias=AliasPath("validation", "verdicts")
    )
    checks: Annotated[list[CheckOut], LISTED] = Field(
        validation_alias=AliasPath("validation", "jobs")
    )

    @field_validator("seconds", mode="before")
    @classmethod
    def _took(cls, finished: datetime | None, info: ValidationInfo) -> float | None:
        """From the Operation's start to the run's end."""
        return (finished - info.data["created_at"]).total_seconds() if finished else None


class ValidationPage(Out):
    items: list[ValidationOut]
    next_page_token: str | None
