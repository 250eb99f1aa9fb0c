"""Compiled statements: an ORM query turned into SQL once per shape, then bound to each
request's values.

Compiling is most of what the ORM costs a list page: on the cluster list, the page query's
``as_sql`` (its ids subquery, its total and its member counts) took four times as long as
PostgreSQL took to run it. The query stays written with the ORM, in one builder function;
``rows`` compiles it with *probes* in place of the values, learns which parameter is which
value, and afterwards only binds: the same SQL text each time (which psycopg then prepares).
``instances`` does the same for a model query and builds its objects as Django does (the
``select_related`` objects and annotations included): the cluster every cluster page reads.

What makes this safe:

- The builder is a module-level function of its inputs alone. Whatever varies per request
  is an input; the cache key is the builder, the caller's ``shape`` and each input's kind
  (``None``, a value, or a sequence and its length), so a ``None`` or a list of another
  length is another statement.
- The builder is compiled twice with two sets of probes. The SQL must come out the same, and
  every parameter must be either one input's probe, in the same place both times, or a
  constant of the query (equal both times). A parameter made *from* an input (a LIKE
  pattern, say) is neither: such a shape is not compiled ahead, and its queries go through
  the ORM as before. So no value of one request can be kept and replayed for another.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]

# Shapes kept per process: a list's filters, sorts and pages are a few dozen at most.
KEPT = 256

# Int probes are positive (a slice takes them) and far above any id or count a query holds.
_INT_PROBE = 9_000_000_000_000
# Where SQL holds a number as text: Django writes a slice's LIMIT and OFFSET into the SQL.
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
_PLACEHOLDER = re.compile(r"%[%s]")


class _Probe:
    """The probe values of one compile: distinct from each other and from any constant a
    query holds (ints far above any id or count; strings with a NUL, which no text holds)."""

    def __init__(self, round_: int):
        self.round = round_
        self.count = 0
        self.meaning: dict[Any, tuple[str, int]] = {}

    def value(self, name: str, index: int, like: Any) -> Any:
        self.count += 1
        probe: Any
        if isinstance(like, str):
            probe = f"\x00{self.round}:{name}:{index}"
        elif isinstance(like, int) and not isinstance(like, bool):
            probe = _INT_PROBE + self.round * 1_000_000 + self.count
        else:
            raise TypeError(f"{name}: only int and str inputs are compiled ahead")
        self.meaning[probe] = (name, index)
        return probe

    def inputs(self, values: dict[str, Any]) -> dict[str, Any]:
        probed: dict[str, Any] = {}
        for name, value in values.items():
            if value is None:
                probed[name] = None
            elif isinstance(value, tuple):
                probed[name] = tuple(self.value(name, i, v) for i, v in enumerate(value))
            else:
                probed[name] = self.value(name, -1, value)
        return probed


@dataclass(frozen=True)
class _Built:
    """How a model query's rows become instances, as Django's ``ModelIterable`` builds them:
    the model's columns, the ``select_related`` objects' populators, the annotations."""

    model: type[Model]
    start: int
    end: int
    init_list: tuple[str, ...]
    populators: tuple
    annotations: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # Per parameter: (input name, index in it; -1 for a scalar), or (None, the constant).
    binds: tuple[tuple[str | None, Any], ...]
    col_count: int
    has_extra_select: bool
    converters: dict
    using: str  # the database alias: its connection is the running thread's own
    built: _Built | None = None  # for ``instances``: how rows become model instances


_EMPTY = object()  # the query can match nothing (an empty IN): no SQL to run
_NOT_AHEAD = object()  # a parameter derives from an input: read through the ORM


def _compile(queryset: QuerySet, probe: _Probe) -> tuple[Any, str, list[tuple]]:
    """The SQL with every probe a parameter and the query's constants in the text, and
    what each parameter is."""
    compiler = queryset.query.get_compiler(queryset.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:
        return compiler, "", []
    binds = [
        probe.meaning[param] if _hashable(param) and param in probe.meaning else (None, param)
        for param in params
    ]
    # An int probe written into the text (a slice's OFFSET) becomes a parameter in its place.
    pieces, placeholders, last = [], 0, 0
    for number in _NUMBER.finditer(sql):
        meaning = probe.meaning.get(int(number.group(1)))
        if meaning is None:
            continue
        before = sql[last : number.start()]
        placeholders += sum(p.group() == "%s" for p in _PLACEHOLDER.finditer(before))
        pieces += [before, "%s"]
        binds.insert(placeholders, meaning)
        placeholders += 1
        last = number.end()
    return compiler, *_inline_constants("".join([*pieces, sql[last:]]), binds)


def _inline_constants(sql: str, binds: list[tuple]) -> tuple[str, list[tuple]]:
    """The query's own constants (a status it excludes, a default) written into the text:
    a prepared statement's generic plan then knows them, and can use a partial index whose
    condition names them (bound, the list's count read 10,000 rows from the heap)."""
    pieces, kept, index, last = [], [], 0, 0
    for placeholder in _PLACEHOLDER.finditer(sql):
        if placeholder.group() != "%s":
            continue
        name, value = binds[index]
        index += 1
        literal = _literal(value) if name is None else None
        if literal is None:
            kept.append((name, value))
            continue
        pieces += [sql[last : placeholder.start()], literal]
        last = placeholder.end()
    return "".join([*pieces, sql[last:]]), kept


def _literal(value: Any) -> str | None:
    """``value`` as SQL text (standard quoting; ``%`` doubled, as in Django's SQL), for plain
    ints and strings only; None: it stays a parameter."""
    if type(value) is int:
        return str(value)
    if type(value) is str and "\x00" not in value:
        return "'" + value.replace("'", "''").replace("%", "%%") + "'"
    return None


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _kinds(values: dict[str, Any]) -> tuple:
    return tuple(
        (name, None if v is None else len(v) if isinstance(v, tuple) else type(v).__name__)
        for name, v in sorted(values.items())
    )


class Statements:
    """A process's compiled statements (LRU, ``KEPT`` of them)."""

    def __init__(self, kept: int = KEPT):
        self.kept = kept
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        # Shapes compiled ahead, and shapes left to the ORM (tests and benchmarks read them).
        self.compiles = 0
        self.refused = 0

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.compiles = self.refused = 0

    def rows(
        self,
        build: Callable[..., QuerySet],
        shape: Hashable,
        **values: Any,
    ) -> list[tuple]:
        """``build(shape, **values)``'s rows as tuples, as its ``values_list`` gives them.
        ``build`` returns a ``values_list`` queryset and reads nothing but its arguments;
        ``shape`` holds what else the caller varies (a sort, the functions it composes),
        hashable, and the same for every request of that shape. Sequences are tuples."""
        entry = self._entry(build, shape, values, instances=False)
        if entry is _EMPTY:
            return []
        if entry is _NOT_AHEAD:
            return list(build(shape, **values))
        return _run(entry, values)

    def instances(
        self,
        build: Callable[..., QuerySet],
        shape: Hashable,
        **values: Any,
    ) -> list[Any]:
        """``build(shape, **values)``'s model instances, as iterating it gives them (its
        ``select_related`` objects and annotations set), under the terms of ``rows``.
        ``build`` returns a model queryset of the model's own manager: no prefetches, no
        related manager's known objects."""
        entry = self._entry(build, shape, values, instances=True)
        if entry is _EMPTY:
            return []
        if entry is _NOT_AHEAD:
            return list(build(shape, **values))
        built = entry.built
        objs = []
        for row in _run(entry, values):
            obj = built.model.from_db(entry.using, built.init_list, row[built.start : built.end])
            for populator in built.populators:
                populator.populate(row, obj)
            for name, position in built.annotations:
                setattr(obj, name, row[position])
            objs.append(obj)
        return objs

    def _entry(self, build, shape, values: dict, *, instances: bool) -> Any:
        for part in (build, *(shape if isinstance(shape, tuple) else (shape,))):
            if callable(part) and getattr(part, "__closure__", None):
                raise TypeError(f"{part!r}: a compiled statement's parts close over nothing")
        # The function itself, not its name: two lambdas of one scope share a name.
        key = (build, shape, _kinds(values), instances)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            entry = self._compile_ahead(build, shape, values, instances)
            with self._lock:
                self._entries[key] = entry
                if entry is _NOT_AHEAD:
                    self.refused += 1
                else:
                    self.compiles += 1
                while len(self._entries) > self.kept:
                    self._entries.popitem(last=False)
        return entry

    @staticmethod
    def _compile_ahead(
        build: Callable[..., QuerySet], shape: Hashable, values: dict, instances: bool
    ) -> Any:
        first, second = _Probe(1), _Probe(2)
        queryset = build(shape, **first.inputs(values))
        related = ("_prefetch_related_lookups", "_known_related_objects")
        if instances and any(getattr(queryset, name) for name in related):
            raise TypeError("compiled instances take no prefetches and no related manager")
        compiler, sql, binds = _compile(queryset, first)
        _again, sql_again, binds_again = _compile(build(shape, **second.inputs(values)), second)
        if sql != sql_again or binds != binds_again:
            return _NOT_AHEAD
        if not sql:
            return _EMPTY
        fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
        return _Compiled(
            sql=sql,
            binds=tuple(binds),
            col_count=compiler.col_count,
            has_extra_select=compiler.has_extra_select,
            converters=compiler.get_converters(fields),
            using=compiler.using,
            built=_built(compiler) if instances else None,
        )


def _built(compiler) -> _Built:
    """What ``ModelIterable`` reads off a compiler that has compiled a model query."""
    klass_info, select = compiler.klass_info, compiler.select
    start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
    return _Built(
        model=klass_info["model"],
        start=start,
        end=end,
        init_list=tuple(column[0].target.attname for column in select[start:end]),
        populators=tuple(get_related_populators(klass_info, select, compiler.using)),
        annotations=tuple(compiler.annotation_col_map.items()),
    )


def _run(entry: _Compiled, values: dict[str, Any]) -> list[tuple]:
    params = [
        value if name is None else values[name] if value == -1 else values[name][value]
        for name, value in entry.binds
    ]
    connection = connections[entry.using]
    with connection.cursor() as cursor:
        cursor.execute(entry.sql, params)
        rows: Sequence = cursor.fetchall()
    if entry.has_extra_select:
        rows = [row[: entry.col_count] for row in rows]
    if not entry.converters:
        return [tuple(row) for row in rows]
    converted = []
    for row in rows:  # as SQLCompiler.apply_converters does
        cells = list(row)
        for position, (functions, expression) in entry.converters.items():
            for function in functions:
                cells[position] = function(cells[position], expression, connection)
        converted.append(tuple(cells))
    return converted


statements = Statements()
