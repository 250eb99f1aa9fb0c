"""What the API takes: query values and request bodies, typed strictly (what a lenient
reading would accept, such as ``"1"`` for 1 or ``yes`` for true, is refused)."""

from typing import Annotated

from ninja import Field, Schema
from pydantic import BeforeValidator, ConfigDict

from clusters.operations.internal import MAX_TARGETS


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


class StrictIn(Schema):
    """A request body, typed strictly: an id or a count is a JSON integer (``true`` or
    ``"1"`` is refused, never read as 1), a flag is ``true``/``false`` (never ``"yes"``)."""

    model_config = ConfigDict(strict=True)


class ClusterCreateIn(StrictIn):
    name: str = Field(max_length=200)
    zone_id: int
    instance_type_id: int
    fabric_type: str
    # The project's SSH keys every member's seed installs beside its own (docs/rules.md#ssh-keys).
    ssh_key_ids: list[int] = Field(default_factory=list)


class ClusterUpdateIn(StrictIn):
    # Each field sent is changed, one not sent is kept; a refusal of either changes neither.
    name: str | None = Field(None, max_length=200)
    # The whole set, replacing the one before ([]: the cluster adds no key to its members).
    ssh_key_ids: list[int] | None = None


class RenameIn(StrictIn):
    name: str = Field(max_length=200)


class StopIn(StrictIn):
    stop_members: bool = False


class AttachIn(StrictIn):
    # The operation's limit, documented here and kept there: past it the request is refused
    # with the operation's own error (too_many_targets), as in the console.
    vm_ids: list[int] = Field(min_length=1, json_schema_extra={"maxItems": MAX_TARGETS})


class VmCreateIn(StrictIn):
    name: str = Field(max_length=200)
    zone_id: int
    instance_type_id: int
    billing_type: str
    disaster_recovery: bool = False
    count: int = 1
    cluster_id: int | None = None
    # The project's SSH keys each new VM's seed installs (docs/rules.md#ssh-keys).
    ssh_key_ids: list[int] = Field(default_factory=list)


class SshKeyCreateIn(StrictIn):
    name: str = Field(max_length=200)
    # One line of an OpenSSH .pub file. Its size is the service's to refuse (up to 16 KB),
    # with words that say so, not the schema's.
    public_key: str


class WebhookCreateIn(StrictIn):
    name: str = Field(max_length=200)
    # http:// or https://; the service refuses the rest with words that say why.
    url: str = Field(max_length=4000)
    # Event types (docs/webhooks.md#events); left out: every type.
    events: list[str] | None = None


class ValidateIn(StrictIn):
    level: int = 1  # dcgmi diag -r 1 (quick) or 2 (about 2 minutes); the service decides


class ReplaceIn(StrictIn):
    # Left out (or null): the cluster's best 예비 (docs/rules.md#spares).
    spare_vm_id: int | None = None


class SpareIn(StrictIn):
    vm_id: int


class PolicyIn(StrictIn):
    # notify (알림만), propose (교체 제안) or auto (자동 교체); the service refuses the rest.
    policy: str = Field(max_length=20)
