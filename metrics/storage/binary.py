"""COPY's binary format, packed by ``struct`` (FIELD-NOTES: binary COPY is ~6x an
``executemany``, and packing by hand is a third of psycopg's ``write_row`` time).

A table's rows are ``vm_id`` (int8), ``ts`` (timestamptz), optionally a device index (int2:
the GPU or port), then float8 metrics, any of them NULL, and optionally a trailing int8 (the
host rows' cluster stamp, NULL for a VM in no cluster).
"""

import struct
from datetime import UTC, datetime
from itertools import repeat

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
