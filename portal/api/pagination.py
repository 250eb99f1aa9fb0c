"""Keyset pages: ``page_size`` rows after the row an opaque ``page_token`` names.

No OFFSET and no COUNT: a page costs the same (one index walk, the same queries) on page 1
and page 200 of 10,000 rows. The token is the last row's id and a signature over the id, the
table and the order (``<id>:<HMAC>``): it carries no sort key (no name, no time), so it reads
as nothing a client had not already been shown; the sort key is read back from the row
(one lookup by primary key). A client can pass it back but not forge or edit it, nor use it
with another list or order; a bad one is a 400, never a 500.
"""

from dataclasses import dataclass
from typing import NamedTuple

from django.core import signing
from django.db.models import Q, QuerySet
from ninja import Schema

from portal.api.inputs import QueryInt
from portal.foundation.errors.api import PageTokenInvalid, RequestInvalid
from portal.foundation.kernel import parse_id

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50
SALT = "portal.api.page"


class PageRequest(Schema):
    """What every list takes: how many rows, from where (each list adds ``order_by``)."""

    page_size: QueryInt = DEFAULT_PAGE_SIZE
    page_token: str | None = None


class Page(NamedTuple):
    """One page of rows, as a list's ``*Page`` schema reads it."""

    items: list
    next_page_token: str | None


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


def page(queryset: QuerySet, table: dict[str, Order], request) -> Page:
    """One page of ``queryset`` as ``request`` asks (its ``page_size``, ``page_token`` and
    ``order_by`` among ``table``) in one query (LIMIT size + 1), and the token of the next
    page (None on the last)."""
    size = page_size(request.page_size)
    order = order_of(table, request.order_by)
    token = request.page_token
    signer = _signer(queryset, order)
    queryset = queryset.order_by(*order.ordering)
    if token:
        value, pk = _read(token, signer, queryset.model, order)
        queryset = queryset.filter(order.after(value, pk))
    rows = list(queryset[: size + 1])
    if len(rows) <= size:
        return Page(rows, None)
    last = rows[size - 1]
    return Page(rows[:size], signer.sign(str(last["id"] if isinstance(last, dict) else last.pk)))


def _signer(queryset: QuerySet, order: Order) -> signing.Signer:
    """Signs a row id for one list (table) in one order: a token of another is refused."""
    sign = "-" if order.descending else ""
    return signing.Signer(salt=f"{SALT}:{queryset.model._meta.label_lower}:{sign}{order.field}")


def _read(token: str, signer: signing.Signer, model, order: Order):
    """(sort key, id) of the row a token names; ``PageTokenInvalid`` for anything else (a
    forged, edited or foreign token, a row that is gone)."""
    try:
        pk = parse_id(signer.unsign(token))
    except (signing.BadSignature, ValueError, TypeError):
        raise PageTokenInvalid() from None
    row = model._base_manager.filter(pk=pk).values_list(order.field, flat=True) if pk else []
    for value in row:
        return value, pk
    raise PageTokenInvalid()
