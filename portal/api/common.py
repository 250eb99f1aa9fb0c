"""What every resource module shares: who is calling, ids from paths, stored errors."""

import orjson
from django.db.models import IntegerField, QuerySet
from django.db.models.expressions import RawSQL
from django.http import HttpResponse
from django.utils import translation

from portal.api import pagination
from portal.api.schemas import CLUSTERS_VISIBLE, SSH_KEYS_VISIBLE, VMS_VISIBLE
from portal.foundation.errors import RuleViolation
from portal.foundation.errors.api import RequestInvalid
from portal.foundation.kernel import require_id
from portal.iam.permissions import Perm
from vms.models import VirtualMachine


def actor(request):
    """The token's user, narrowed to its project (``portal.iam.tokens.authenticate``)."""
    return request.auth


def project(request):
    return request.auth.api_token.project


def path_id(value: int, error: type[RuleViolation]) -> int:
    """An id from the path that can name a row, else ``error`` (a 404, never a DataError)."""
    return require_id(value, error)


def visible(request) -> dict:
    """What the response schemas may tell this reader of the rows they name
    (``schemas.CLUSTERS_VISIBLE``, ``VMS_VISIBLE``): a token sees one project, so one answer
    for every row, asked once."""
    user, where = actor(request), project(request)
    return {
        CLUSTERS_VISIBLE: user.has_perm(Perm.CLUSTER_READ, where),
        VMS_VISIBLE: user.has_perm(Perm.VM_READ, where),
        SSH_KEYS_VISIBLE: user.has_perm(Perm.SSH_KEY_READ, where),
    }


def json_bytes(data) -> bytes:
    """``data`` as JSON (orjson: UTF-8, Korean readable as is; what it cannot take natively
    as ``str``). A stored value no JSON reader could take (an integer past 64 bits, nesting
    past orjson's limit) never fails the read: the answer is made again with such values as
    null."""
    try:
        return orjson.dumps(data, default=str)
    except orjson.JSONEncodeError:
        return orjson.dumps(json_safe(data), default=str)


def json_response(data, status: int = 200) -> HttpResponse:
    """A JSON answer made directly, for what no route's schema serializes (a problem)."""
    response = HttpResponse(json_bytes(data), status=status, content_type="application/json")
    return api_headers(response)


JSON_INTS = (-(2**63), 2**64 - 1)  # what orjson (and most readers) take as an integer
JSON_DEPTH = 200  # below orjson's 254


def json_safe(value, depth: int = 0):
    """``value`` with every integer outside ``JSON_INTS`` and everything nested deeper than
    ``JSON_DEPTH`` made None; other values as they are."""
    if depth > JSON_DEPTH:
        return None
    if isinstance(value, dict):
        return {key: json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item, depth + 1) for item in value]
    if isinstance(value, int) and not JSON_INTS[0] <= value <= JSON_INTS[1]:
        return None
    return value


def api_headers(response: HttpResponse) -> HttpResponse:
    """The language the answer is in, and what it varies with."""
    response["Content-Language"] = translation.get_language()
    response["Vary"] = "Accept-Language, Authorization"
    return response


def member_count(status: str | None = None) -> RawSQL:
    """Members of each cluster (of ``status``, if given) as a correlated subquery, written as
    SQL: the ORM's Subquery cost more to compile than the detail's whole SQL
    takes to run; this runs for the rows of the page only."""
    vms = VirtualMachine._meta.db_table
    clusters = VirtualMachine._meta.get_field("cluster").related_model._meta.db_table  # type: ignore[union-attr]
    sql = f"SELECT count(*) FROM {vms} m WHERE m.cluster_id = {clusters}.id"  # noqa: S608 - names from the models and constants; values are parameters
    if status is None:
        return RawSQL(sql, (), output_field=IntegerField())  # noqa: S611 - names from the models; values are parameters
    return RawSQL(f"{sql} AND m.status = %s", (status,), output_field=IntegerField())  # noqa: S611 - names from the models; values are parameters


class ListFilters(pagination.PageRequest):
    """The console's list filters and the page of a list (``order_by``: see each list)."""

    status: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    name: str | None = None


def filtered(rows: QuerySet, filters: ListFilters, statuses) -> QuerySet:
    """``rows`` after the filters: a status among ``statuses`` (삭제됨 is hidden unless it
    is asked for, as on the console), zone and instance type codes, a part of the name."""
    if filters.status:
        if filters.status not in statuses:
            raise RequestInvalid(field="status", name="status")
        rows = rows.filter(status=filters.status)
    else:
        rows = rows.alive()  # type: ignore[attr-defined]
    if filters.zone:
        rows = rows.filter(zone__code=filters.zone)
    if filters.instance_type:
        rows = rows.filter(instance_type__code=filters.instance_type)
    if filters.name:
        rows = rows.filter(name__icontains=filters.name)
    return rows
