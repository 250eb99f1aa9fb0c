"""What every resource module shares: who is calling, ids from paths, stored errors."""

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from ninja import Schema

from portal.api import pagination
from portal.api.problems import RequestInvalid
from portal.errors import RuleViolation
from portal.kernel import require_id
from vms.models import VirtualMachine


def actor(request):
    """The token's user, narrowed to its project (``portal.api.tokens.authenticate``)."""
    return request.auth


def project(request):
    return request.auth.api_token.project


def path_id(value: int, error: type[RuleViolation]) -> int:
    """An id from the path that can name a row, else ``error`` (a 404, never a DataError)."""
    return require_id(value, error)


def error_json(error: RuleViolation | None) -> dict | None:
    return None if error is None else {"code": error.code, "message": error.message}


def member_count(**filters):
    """Members of each cluster (matching ``filters``) as a correlated subquery: it runs for
    the rows of the page only."""
    members = (
        VirtualMachine.objects.filter(cluster=OuterRef("pk"), **filters)
        .order_by()
        .values("cluster")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(members), 0)


class ListFilters(Schema):
    """The console's list filters and the page of a list (``order_by``: see each list)."""

    page_size: int = pagination.DEFAULT_PAGE_SIZE
    page_token: str | None = None
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
        rows = rows.alive()
    if filters.zone:
        rows = rows.filter(zone__code=filters.zone)
    if filters.instance_type:
        rows = rows.filter(instance_type__code=filters.instance_type)
    if filters.name:
        rows = rows.filter(name__icontains=filters.name)
    return rows
