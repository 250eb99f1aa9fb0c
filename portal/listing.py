"""Filters and sort of a list page, read from the query string so a list is a URL to share.

A bad value (an unknown status, a zone id that is not a number, a sort key outside the
page's whitelist) is ignored, field by field: the list shows as if it had not been asked,
never a 500, and the other filters still apply.
"""

from django import forms
from django.db.models import Case, Value, When
from django.db.models.expressions import BaseExpression
from django.http import QueryDict

# A form's ids would otherwise be ``id_zone``: the create panel opened on the same page has
# one too, and a label then names the wrong control.
FILTER_AUTO_ID = "filter_%s"


def choice_rank(field: str, values: list[str]) -> Case:
    """``field`` ordered as ``values`` lists it (a status by its lifecycle, not its code)."""
    return Case(*[When(**{field: v}, then=Value(i)) for i, v in enumerate(values)])


def catalog_sorts(statuses: list[str]) -> dict[str, tuple[str | BaseExpression, ...]]:
    """The sorts of every list of catalog resources (clusters, VMs): by name, by status in
    its lifecycle's order (``statuses``), by the zone's and the instance type's codes."""
    return {
        "name": ("name",),
        "status": (choice_rank("status", statuses),),
        "zone": ("zone__code",),
        "type": ("instance_type__code",),
    }


class ListFilterForm(forms.Form):
    """Filter fields, plus ``?sort=key`` or ``?sort=-key`` over the whitelist ``SORTS``.

    ``SORTS`` maps a key to the order_by terms (field names or expressions); the primary key
    is always the last term, so pages never repeat or skip a row.
    """

    SORTS: dict[str, tuple[str | BaseExpression, ...]] = {}
    DEFAULT_SORT = ""

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
