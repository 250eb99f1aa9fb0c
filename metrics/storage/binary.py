"""PostgreSQL's binary formats, packed by ``struct``: COPY's (binary COPY is much faster than
an ``executemany``, and packing by hand cheaper than psycopg's ``write_row``), and a
one-dimensional array's, for the small INSERT's device columns (``array``).

A table's rows are ``vm_id`` (int8), ``ts`` (timestamptz), optionally a device index (int2:
the GPU or port), then float8 metrics, any of them NULL, and optionally a trailing int8 (the
host rows' cluster stamp, NULL for a VM in no cluster).
"""

import struct
from datetime import UTC, datetime
from functools import lru_cache
from itertools import chain, repeat
from typing import TypeVar

from psycopg.adapt import Dumper, PyFormat
from psycopg.pq import Format

from metrics.storage.db import micros_of

# Signature, flags, header extension; then rows; then -1.
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_TRAILER = struct.pack("!h", -1)
# Binary timestamptz counts microseconds from 2000-01-01.
_PG_EPOCH_MICROS = micros_of(datetime(2000, 1, 1, tzinfo=UTC))
_NULL = struct.pack("!i", -1)  # a field of length -1, no data
_INT8 = struct.Struct("!iq")  # length-prefixed int64
_INT2 = struct.Struct("!ih")
_FLOAT8 = struct.Struct("!id")


def pack(
    vm_ids: list, micros: list, devices: list | None, metrics: list, tail: list | None = None
) -> bytes:
    """COPY binary data for the rows (columns as lists), one ``struct`` call per row by
    C-level maps; ``tail``: a last int8 column (the cluster stamps), if any. A column mixing
    values and nulls (rare: a GPU lost mid-batch, a batch of VMs in and out of clusters)
    cannot be one fixed format; such a batch is packed field by field instead."""
    stamps = map((-_PG_EPOCH_MICROS).__add__, micros)
    count = 2 + (devices is not None) + len(metrics) + (tail is not None)
    # Each value column with its 8-byte format: float8 metrics, then the int8 tail.
    typed = [(column, "id") for column in metrics]
    if tail is not None:
        typed.append((tail, "iq"))
    if any(0 < column.count(None) < len(column) for column, _format in typed):
        return _pack_fields(count, vm_ids, stamps, devices, metrics, tail)
    fields = ["!h", "iq", "iq"]  # field count; vm_id; ts
    args = [repeat(count), repeat(8), vm_ids, repeat(8), stamps]
    if devices is not None:
        fields.append("ih")
        args += [repeat(2), devices]
    for column, value_format in typed:
        if column and column[0] is None:  # all NULL: a field of length -1
            fields.append("i")
            args.append(repeat(-1))
        else:
            fields.append(value_format)
            args += [repeat(8), column]
    row = struct.Struct("".join(fields))
    return b"".join((_SIGNATURE, *map(row.pack, *args), _TRAILER))


def _pack_fields(count, vm_ids, stamps, devices, metrics, tail):
    header = struct.pack("!h", count)
    parts = [_SIGNATURE]
    indexes = repeat(None) if devices is None else devices
    tails = repeat(None) if tail is None else tail
    for vm_id, ts, device, last, *values in zip(
        vm_ids, stamps, indexes, tails, *metrics, strict=False
    ):
        parts += [header, _INT8.pack(8, vm_id), _INT8.pack(8, ts)]
        if devices is not None:
            parts.append(_INT2.pack(2, device))
        parts += [_NULL if value is None else _FLOAT8.pack(8, value) for value in values]
        if tail is not None:
            parts.append(_NULL if last is None else _INT8.pack(8, last))
    parts.append(_TRAILER)
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# Arrays as query parameters


class Array(bytes):
    """A one-dimensional array in PostgreSQL's binary format, sent by psycopg as it is (see
    ``register``). psycopg's own list dumper walks the list in Python, one call per element;
    this is one ``struct`` call a column (docs/performance.md, 2026-12-06)."""

    __slots__ = ()
    oid = 0  # the array type; each kind below names its own
    element: tuple[int, str, int]  # the element's type, its ``struct`` code, its size


def _kind(name: str, oid: int, element_oid: int, code: str, size: int) -> type[Array]:
    return type(name, (Array,), {"__slots__": (), "oid": oid, "element": (element_oid, code, size)})


Float8Array = _kind("Float8Array", 1022, 701, "d", 8)
Int2Array = _kind("Int2Array", 1005, 21, "h", 2)
Int8Array = _kind("Int8Array", 1016, 20, "q", 8)
TimestamptzArray = _kind("TimestamptzArray", 1185, 1184, "q", 8)  # microseconds since 2000


_A = TypeVar("_A", bound=Array)


def array(kind: type[_A], values: list) -> _A:
    """``values`` (numbers, any of them None) as an array of ``kind``, whose element format
    ``struct`` checks: a value it cannot pack raises ``struct.error``, never a wrong row.
    Without a None, the whole array is one ``struct`` call."""
    element_oid, code, size = kind.element
    count = len(values)
    if None in values:
        field = _FIELDS[code]
        header = _ARRAY_HEADER.pack(1, 1, element_oid, count, 1)
        fields = [_NULL if value is None else field.pack(size, value) for value in values]
        return kind(b"".join((header, *fields)))
    elements = chain.from_iterable(zip(repeat(size), values))
    return kind(_array_layout(code, count).pack(1, 0, element_oid, count, 1, *elements))


# ndim, has-nulls flag, element type; the one dimension: its length and lower bound.
_ARRAY_HEADER = struct.Struct("!iiIii")
# A length-prefixed element by its ``struct`` code, as COPY's fields are packed above.
_FIELDS = {"d": _FLOAT8, "h": _INT2, "q": _INT8}


@lru_cache(maxsize=256)
def _array_layout(code, count):
    """The header, then ``count`` length-prefixed elements: a whole array in one call."""
    return struct.Struct(_ARRAY_HEADER.format + f"i{code}" * count)


def timestamps(micros: list) -> Array:
    """Instants (``micros``: microseconds since 1970) as a timestamptz array."""
    return array(TimestamptzArray, [value - _PG_EPOCH_MICROS for value in micros])


class _ArrayDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj):
        return obj


_DUMPERS = {
    kind: type(f"{kind.__name__}Dumper", (_ArrayDumper,), {"oid": kind.oid})
    for kind in (Float8Array, Int2Array, Int8Array, TimestamptzArray)
}


def register(adapters) -> None:
    """Let ``adapters`` send ``Array`` values as they are, once: a connection's, whose cursors
    inherit them (registering copies psycopg's dumper maps: once, not per cursor)."""
    if adapters.get_dumper(Float8Array, PyFormat.BINARY) is _DUMPERS[Float8Array]:
        return
    for kind, dumper in _DUMPERS.items():
        adapters.register_dumper(kind, dumper)
