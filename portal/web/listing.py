"""Filters and sort of a list page, read from the query string so a list is a URL to share.

A bad value (an unknown status, a zone id that is not a number, a sort key outside the
page's whitelist) is ignored, field by field: the list shows as if it had not been asked,
never a 500, and the other filters still apply.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django import forms
from django.core.paginator import Page, Paginator
from django.db.models import (
    BooleanField,
    Case,
    F,
    Field,
    Func,
    IntegerField,
    Model,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.expressions import BaseExpression, OrderBy
from django.http import HttpResponse, QueryDict
from django.shortcuts import render

from portal.models import instances_of, light_instances
from portal.speed.statements import statements

# A form's ids would otherwise be ``id_zone``: the create panel opened on the same page has
# one too, and a label then names the wrong control.
FILTER_AUTO_ID = "filter_%s"


def choice_rank(field: str, values: list[str]) -> Case:
    """``field`` ordered as ``values`` lists it (a status by its lifecycle, not its code)."""
    return Case(*[When(**{field: v}, then=Value(i)) for i, v in enumerate(values)])


class NullsAsPostgres(F):
    """A nullable column as a sort term: NULLs last ascending and first descending, as
    PostgreSQL orders them, on every database (SQLite orders NULLs first ascending)."""

    def asc(self, **kwargs) -> OrderBy:
        return super().asc(nulls_last=True)

    def desc(self, **kwargs) -> OrderBy:
        return super().desc(nulls_first=True)


# A sort's term: a field's name, an expression, or a ``NullsAsPostgres`` column.
SortTerm = str | BaseExpression | F


def catalog_sorts(statuses: list[str]) -> dict[str, tuple[SortTerm, ...]]:
    """The sorts of every list of catalog resources (clusters, VMs): by name, by status in
    its lifecycle's order (``statuses``), by the zone's and the instance type's codes."""
    return {
        "name": ("name",),
        "status": (choice_rank("status", statuses),),
        "zone": ("zone__code",),
        "type": ("instance_type__code",),
    }


Header = tuple[str, Any, str]


def headers(model: type[Model], **columns: str | tuple[Any, str]) -> tuple[Header, ...]:
    """A list's ``HEADERS``, in the order given: ``key="field"`` heads the column with the
    verbose name of ``model``'s field (the words the forms and the admin use for it);
    ``key=(label, css)`` is a column no field names, with its css class."""
    return tuple(
        (key, cast(Field, model._meta.get_field(spec)).verbose_name, "")
        if isinstance(spec, str)
        else (key, *spec)
        for key, spec in columns.items()
    )


class ListFilterForm(forms.Form):
    """Filter fields, plus ``?sort=key`` or ``?sort=-key`` over the whitelist ``SORTS``.

    ``SORTS`` maps a key to the order_by terms (field names or expressions); the primary key
    is always the last term, so pages never repeat or skip a row.
    """

    SORTS: dict[str, tuple[SortTerm, ...]] = {}
    DEFAULT_SORT = ""
    # The table's columns: (key, label, css class), most made by ``headers``; a key in SORTS
    # sorts by it.
    HEADERS: tuple[Header, ...] = ()

    def __init__(self, data: QueryDict | None = None, **kwargs):
        kwargs.setdefault("auto_id", FILTER_AUTO_ID)
        self.query = data if data is not None else QueryDict()
        super().__init__(data or None, **kwargs)

    def value(self, name: str):
        """The field's cleaned value, or None when it is empty or invalid."""
        if not self.is_bound:
            return None
        self.is_valid()  # fills cleaned_data with the fields that are valid
        return self.cleaned_data.get(name) or None

    @property
    def is_filtered(self) -> bool:
        """Whether a valid filter narrows the list (an empty list then says so)."""
        return any(self.value(name) for name in self.fields)

    @property
    def sort(self) -> str:
        """The sort asked for if the whitelist has it, else the page's default."""
        asked = self.query.get("sort", "")
        return asked if asked.removeprefix("-") in self.SORTS else self.DEFAULT_SORT

    def ordering(self) -> list:
        key = self.sort
        descending = key.startswith("-")
        terms = [*self.SORTS[key.removeprefix("-")], "pk"]
        return [_direction(term, descending) for term in terms]

    def sort_columns(self) -> dict[str, dict[str, str]]:
        """Per sortable column: the query string that sorts by it (ascending first, the
        other way when it is already the sort) and its ``aria-sort`` value. The current
        filters stay in the link; the page does not (a new order starts at page 1)."""
        current = self.sort
        columns = {}
        for key in self.SORTS:
            query = self.query.copy()
            query.pop("page", None)
            query["sort"] = f"-{key}" if current == key else key
            if current == key:
                state = "ascending"
            elif current == f"-{key}":
                state = "descending"
            else:
                state = "none"
            columns[key] = {"query": query.urlencode(), "aria": state}
        return columns

    def page_query(self) -> str:
        """The query string without ``page``: for the pager's links and the poll."""
        query = self.query.copy()
        query.pop("page", None)
        return query.urlencode()


def _direction(term, descending: bool):
    if isinstance(term, str):
        return f"-{term}" if descending else term
    return term.desc() if descending else term.asc()


MAX_OFFSET = 2**63 - 1


class _AmongIds(Func):
    """``pk = ANY(ARRAY(<the page's ids>))`` on PostgreSQL, ``pk IN (<ids>)`` elsewhere.

    Written as an array, the page's ids are one value to the planner, estimated alike for
    every project, so the plan it builds without the request's values costs what a plan for
    them would: PostgreSQL then keeps that one plan for the prepared statement. Written as
    ``IN (subquery)``, the estimate followed the project's size; a small project's own plan
    looked cheaper, and with mostly small projects every list request was planned anew
    (planning took longer than running it)."""

    template = "%(expressions)s"
    arg_joiner = " IN "
    output_field = BooleanField()

    def __init__(self, ids: QuerySet):
        super().__init__(F("pk"), _PageIds(ids))

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="%(expressions)s)", arg_joiner=" = ANY(ARRAY"
        )


class _PageIds(Subquery):
    # No ids to read (a reader of no project): no query at all, as ``pk__in`` does.
    empty_result_set_value = NotImplemented


class _CountAll(Func):
    """``COUNT(*)`` as a plain expression: in ``.values()`` it adds no GROUP BY, so over a
    filtered queryset it is the scalar subquery "how many rows match"."""

    template = "COUNT(*)"
    output_field = IntegerField()


@dataclass(frozen=True)
class Rows:
    """What a list pages over as a module-level function of the request's values (ints,
    strings, tuples of them, or None), so that its page read is compiled once per shape
    (``portal.speed.statements``) rather than on every request."""

    model: type[Model]
    build: Callable[..., QuerySet]
    values: dict[str, Any]
    # A module-level function of the same values: the total as an expression read from
    # somewhere kept (a tally), or None where the rows must be counted.
    total: Callable[..., Any] | None = None

    def queryset(self) -> QuerySet:
        return self.build(**self.values)

    def kept_total(self) -> Any:
        return None if self.total is None else self.total(**self.values)


def list_page(
    rows: QuerySet | Rows,
    ordering: list,
    asked,
    shown: Callable[[QuerySet], QuerySet],
    per_page: int,
    fields: tuple[str, ...] = (),
) -> Page:
    """Page ``asked`` of ``rows`` in ``ordering``, in one query where the page exists.

    The shown rows are ``shown(Model.objects.filter(<pk among the page's ids>))``: the ids
    are paged over the narrow filtered rows, with only the sort's joins, so the shown rows'
    joins and subqueries run for the rows shown alone, not for every row OFFSET skips. The
    total rides along as an uncorrelated scalar subquery (computed once): a count of the
    rows, or what ``Rows.total`` reads from a tally where one is kept. As Django's
    ``get_page``: a number that is not one is page 1; a page outside the list is the last
    one (which costs a count and a second read). With ``fields``, the rows are read as
    ``light_instances`` holding those fields (and the annotations ``shown`` adds by name);
    given as ``Rows`` with ``fields``, the read is compiled ahead (``shown`` is then a
    module-level function too)."""
    try:
        number = int(asked)
    except (TypeError, ValueError):
        number = 1

    def read(number: int) -> list:
        if isinstance(rows, Rows) and fields:
            return _compiled_page(rows, ordering, shown, number, per_page, fields)
        if isinstance(rows, Rows):
            return _read_page(
                rows.queryset(), ordering, shown, number, per_page, fields, rows.kept_total()
            )
        return _read_page(rows, ordering, shown, number, per_page, fields)

    # A number whose OFFSET would not fit a bigint is past the end too (never a DataError).
    shown_rows = read(number) if 1 <= number <= MAX_OFFSET // per_page else []
    if shown_rows:
        total = shown_rows[0]._list_total
    else:
        total = (rows.queryset() if isinstance(rows, Rows) else rows).count()
        last = max(1, -(-total // per_page))
        if number != last:
            number = last
            shown_rows = read(number) if total else []
    paginator = Paginator((), per_page)
    paginator.count = total
    return Page(shown_rows, number, paginator)


def _page_query(rows, ordering, shown, start: int, per_page: int, total=None) -> QuerySet:
    ids = rows.order_by(*ordering).values("pk")[start : start + per_page]
    if total is None:
        total = Subquery(rows.order_by().values(n=_CountAll()))
    return (
        shown(rows.model._default_manager.filter(_AmongIds(ids)))
        .annotate(_list_total=total)
        .order_by(*ordering)
    )


def _read_page(rows, ordering, shown, number, per_page, fields, total=None) -> list:
    page = _page_query(rows, ordering, shown, (number - 1) * per_page, per_page, total)
    return light_instances(page, (*fields, "_list_total")) if fields else list(page)


def _compiled_page(rows: Rows, ordering, shown, number, per_page, fields) -> list:
    # The first page is a statement of its own, with no OFFSET: an OFFSET given as a value
    # is estimated at a tenth of the rows, so the plan PostgreSQL would keep for every page
    # looked dearer than the first page's own, and the most asked page was planned anew
    # every time.
    start = (number - 1) * per_page
    shape = (rows.build, rows.total, tuple(ordering), shown, per_page, fields, start == 0)
    paged = {"start": start} if start else {}
    read = statements.rows(_page_values, shape, **paged, **rows.values)
    db = rows.model._default_manager.db
    return instances_of(rows.model, db, (*fields, "_list_total"), read)


def _page_values(shape, start=0, **values) -> QuerySet:
    build, kept_total, ordering, shown, per_page, fields, _first = shape
    total = None if kept_total is None else kept_total(**values)
    page = _page_query(build(**values), list(ordering), shown, start, per_page, total)
    return page.values_list(*fields, "_list_total")


def render_list(
    request, template: str, table: str, page: Page, filters: ListFilterForm, **extra
) -> HttpResponse:
    """The list page, or only its table (the partial named ``table``) when HTMX asks for
    that element: a filter, sort or page change, and the poll while rows are in transition.
    A history restore (back button with an evicted cache) needs the whole page. Every list
    template reads the page, the filters, the sort and its columns, and the query string the
    pager and the poll keep; ``extra`` adds the page's own."""
    context = {
        "page": page,
        "filters": filters,
        "sort": filters.sort,
        "columns": filters.sort_columns(),
        "query": filters.page_query(),
        **extra,
    }
    htmx = getattr(request, "htmx", None)
    if htmx and htmx.target == table and not htmx.history_restore_request:
        return render(request, f"{template}#{table}", context)
    return render(request, template, context)
