"""Column checks the ingest API shares between host samples and device rows: a column is
checked by C-level builtins (``set(map(type, …))``, ``min``, ``max``), and only a failing one
is walked in Python to name its first offending value."""

import json

from django.utils.translation import gettext as _

from metrics import errors

NUMBER = frozenset({int, float})
NUMBER_OR_NONE = frozenset({int, float, type(None)})


def shown(value) -> str:
    """A value as the refusal quotes it: a number or a short string as JSON, a container
    by its kind (it may be nested too deep to print), everything cut to 40 characters."""
    if isinstance(value, list | dict):
        return "[…]" if isinstance(value, list) else "{…}"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def first_bad(column, ok):
    return next(i for i, value in enumerate(column) if not ok(value))


def check_column(column, name, nullable, lowest, highest, where, place=None):
    """Refuse ``column`` unless every value is a number (or None, if ``nullable``) in
    [lowest, highest], naming the first that is not as ``where[i].name``. ``place(i)`` gives
    ``(where, i)`` for columns that flatten nested arrays (a sample's GPUs)."""
    place = place or (lambda index: (where, index))
    types = set(map(type, column))
    if not types <= (NUMBER_OR_NONE if nullable else NUMBER):
        index = first_bad(column, lambda v: v is None and nullable or type(v) in NUMBER)
        at, i = place(index)
        raise errors.NotANumber(
            _("%(where)s[%(i)d].%(name)s: 숫자여야 합니다 (받은 값 %(value)s).")
            % {"where": at, "i": i, "name": name, "value": shown(column[index])},
        )
    values = [v for v in column if v is not None] if type(None) in types else column
    if not values:
        return
    # No NaN can get here: orjson refuses NaN and Infinity (see ``parse``), and the
    # comparisons below would not be reliable with one.
    if min(values) >= lowest and max(values) <= highest:
        return
    index = first_bad(column, lambda v: v is None or lowest <= v <= highest)
    value = column[index]
    error: type[errors.IngestError]
    if value < 0:
        error, message = (
            errors.Negative,
            _("%(where)s[%(i)d].%(name)s: 음수는 허용되지 않습니다 (받은 값 %(value)s)."),
        )
    else:
        error, message = (
            errors.OutOfRange,
            _(
                "%(where)s[%(i)d].%(name)s: %(low)g 이상 %(high)g 이하여야 합니다 "
                "(받은 값 %(value)s)."
            ),
        )
    at, i = place(index)
    raise error(
        message
        % {
            "where": at,
            "i": i,
            "name": name,
            "value": shown(value),
            "low": lowest,
            "high": highest,
        }
    )
