"""Keyset pages: ``page_size`` rows after the row an opaque ``page_token`` names.

No OFFSET and no COUNT: a page costs the same (one index walk, the same queries) on page 1
and page 200 of 10,000 rows. The token is the last row's sort key and id, signed, so a
client can pass it back but not forge or edit it; a bad one is a 422, never a 500.
"""

from dataclasses import dataclass
from datetime import datetime

from django.core import signing
from django.db.models import Q, QuerySet
from ninja import Schema

from portal.api.errors import PageTokenInvalid, RequestInvalid

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50
SALT = "portal.api.page"


class PageRequest(Schema):
    """What every list takes: how many rows, from where (each list adds ``order_by``)."""

    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str | None = None


@dataclass(frozen=True)
class Order:
    """One ``order_by`` value: the model field it sorts on and its direction (id breaks
    ties in the same direction)."""

    field: str
    descending: bool

    @property
    def ordering(self) -> tuple[str, str]:
        sign = "-" if self.descending else ""
        return (f"{sign}{self.field}", f"{sign}id")

    def after(self, value, pk) -> Q:
        """Rows after (value, pk) in this order. The plain bound on the field comes first so
        PostgreSQL starts the index walk there: with the OR alone, the last page of 10,000
        filtered its way past every earlier row (3.3x the floor, the first page 2.4x)."""
        op = "lt" if self.descending else "gt"
        bound = Q(**{f"{self.field}__{op}e": value})
        return bound & (
            Q(**{f"{self.field}__{op}": value}) | Q(**{self.field: value, f"id__{op}": pk})
        )


def orders(*fields: str) -> dict[str, Order]:
    """``order_by`` values for fields: ``name`` ascending, ``-name`` descending."""
    table = {}
    for field in fields:
        table[field] = Order(field, False)
        table[f"-{field}"] = Order(field, True)
    return table


def page_size(value: int) -> int:
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise RequestInvalid(field="page_size", name="page_size (1-500)")
    return value


def order_of(table: dict[str, Order], value: str) -> Order:
    if value not in table:
        raise RequestInvalid(field="order_by", name=f"order_by ({', '.join(table)})")
    return table[value]


def page(queryset: QuerySet, table: dict[str, Order], request) -> tuple[list, str | None]:
    """One page of ``queryset`` as ``request`` asks (its ``page_size``, ``page_token`` and
    ``order_by`` among ``table``) in one query (LIMIT size + 1), and the token of the next
    page (None on the last)."""
    size = page_size(request.page_size)
    order = order_of(table, request.order_by)
    token = request.page_token
    queryset = queryset.order_by(*order.ordering)
    if token:
        value, pk = _read(token, order)
        queryset = queryset.filter(order.after(value, pk))
    rows = list(queryset[: size + 1])
    if len(rows) <= size:
        return rows, None
    last = rows[size - 1]
    key = (
        (last[order.field], last["id"])
        if isinstance(last, dict)
        else (getattr(last, order.field), last.pk)
    )
    return rows[:size], _write(key, order)


def _write(row, order: Order) -> str:
    value, pk = row
    if isinstance(value, datetime):
        value = {"t": value.isoformat()}
    return signing.dumps([order.field, order.descending, value, pk], salt=SALT, compress=True)


def _read(token: str, order: Order):
    try:
        field, descending, value, pk = signing.loads(token, salt=SALT)
    except (signing.BadSignature, ValueError, TypeError):
        raise PageTokenInvalid() from None
    if (field, descending) != (order.field, order.descending):
        raise PageTokenInvalid()
    if isinstance(value, dict):
        value = datetime.fromisoformat(value["t"])
    return value, pk
