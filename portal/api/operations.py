"""operations: the record of every change (``clusters.operations``), and how a change is
answered: 202 with its Operation, once per ``Idempotency-Key``.

The same key with the same request within 24 hours answers the first Operation again (no
second change); with another request it is a 422. A key is the caller's in one project on
one route (user, project, method and route template): the same key with another project's
token, or on another route, is another request. It is kept on the Operation itself
(``idempotency_key``, ``idempotency_scope``, ``request_hash``).
"""

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.utils import timezone
from ninja import Query, Router

from clusters.models import Operation
from clusters.operations import cancel_operation, visible_operations
from portal.api import pagination
from portal.api.common import actor, visible
from portal.api.inputs import QueryInt
from portal.api.schemas import OperationOut, OperationPage, read
from portal.foundation.errors.api import IdempotencyKeyExpired, IdempotencyKeyReused, RequestInvalid
from portal.foundation.kernel import parse_id
from portal.iam.permissions import Perm

router = Router(tags=["operations"])
ORDERS = pagination.orders("created_at")
IDEMPOTENCY_WINDOW = timedelta(hours=24)
KEY_MAX = 100  # Operation.idempotency_key


class OperationFilters(pagination.PageRequest):
    order_by: str = "-created_at"
    cluster: QueryInt | None = None


def _with_items():
    return Operation.objects.prefetch_related("items")


def idempotency(request) -> tuple[str, str, str] | None:
    """(key, hash of the request, scope) from ``Idempotency-Key``, or None without one. The
    scope is the method and the route template (``POST api/v1/virtual-machines/<int:vm_id>:start``);
    the hash covers the concrete path and body, so the key on another target is refused."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    key = key.strip()
    if not (0 < len(key) <= KEY_MAX and key.isascii() and key.isprintable()):
        raise RequestInvalid(field="Idempotency-Key", name="Idempotency-Key")
    try:
        body = json.dumps(json.loads(request.body or b"null"), sort_keys=True)
    except ValueError:
        body = request.body.decode("utf-8", "replace")
    digest = hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()
    route = request.resolver_match.route if request.resolver_match else request.path
    return key, digest, f"{request.method} {route}"[:200]


def accepted(request, run: Callable[[tuple[str, str, str] | None], Any]) -> OperationOut:
    """Run a change (``run(idempotency)`` calls one ``clusters.operations`` function) and
    answer with its Operation (the route's one status, 202) — or, for a key already used,
    the first Operation."""
    claim = idempotency(request)
    if claim is not None:
        earlier = (
            _with_items()
            .filter(
                actor_id=actor(request).pk,
                project_id=request.auth.api_token.project_id,
                idempotency_scope=claim[2],
                idempotency_key=claim[0],
            )
            .first()
        )
        if earlier is not None:
            if earlier.request_hash != claim[1]:
                raise IdempotencyKeyReused()
            if timezone.now() - earlier.created_at > IDEMPOTENCY_WINDOW:
                raise IdempotencyKeyExpired()  # spent: a retry this late is not a retry
            return read(OperationOut, earlier, **visible(request))
    result = run(claim)
    operation = result[0] if isinstance(result, tuple) else result
    return read(OperationOut, _with_items().get(pk=operation.pk), **visible(request))


def change(request, operation: Callable[..., Any], *args: Any, **kwargs: Any) -> OperationOut:
    """A change answered by ``accepted``: ``operation(*args, **kwargs)``, one
    ``clusters.operations`` function, called by the token's user with the request's
    idempotency claim."""
    return accepted(
        request,
        lambda claim: operation(*args, actor=actor(request), idempotency=claim, **kwargs),
    )


@router.get("/operations/{int:operation_id}", response=OperationOut, summary="작업")
def get_operation(request, operation_id: int):
    row = visible_operations(actor(request)).prefetch_related("items").get_or_404(operation_id)
    return read(OperationOut, row, **visible(request))


@router.get("/operations", response=OperationPage, summary="작업 목록")
def list_operations(request, filters: Query[OperationFilters]):
    """Newest first; ``cluster`` keeps one cluster's."""
    user = actor(request)
    operations = visible_operations(user).prefetch_related("items")
    if filters.cluster is not None:
        # A cluster's operations are cluster data: only where the caller may read clusters.
        cluster_id = parse_id(filters.cluster)
        readable = Operation.objects.restrict(user, Perm.CLUSTER_READ).values("pk")
        operations = (
            operations.filter(cluster_id=cluster_id, pk__in=readable)
            if cluster_id
            else operations.none()
        )
    return read(OperationPage, pagination.page(operations, ORDERS, filters), **visible(request))


@router.post(
    "/operations/{int:operation_id}:cancel",
    response={202: OperationOut},
    summary="작업 취소",
)
def cancel(request, operation_id: int):
    """Cancel a running 교체 (until its spare has joined; the member it stopped is started
    again) or 클러스터 검증 (no verdict recorded): the cluster as it was. VM UPDATE for a
    교체, CLUSTER UPDATE for a 검증; anything else is ``not_cancellable``."""
    cancel_operation(operation_id, actor=actor(request))
    row = visible_operations(actor(request)).prefetch_related("items").get_or_404(operation_id)
    return 202, read(OperationOut, row, **visible(request))
