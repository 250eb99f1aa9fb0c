"""Where samples go: raw writes (``writes``), day partitions and retention
(``partitions``), rollups (``rollups``); ``db`` holds what they share. Beside them the
raw-SQL reads: series (``series_sql``), charts (``charts``), the straggler
(``straggler``), Prometheus exposition (``exposition``), device events (``events``). The
names below are the storage API the rest of the app uses."""

from metrics.storage.db import datetime_of, is_postgresql, micros_of, to_micros
from metrics.storage.partitions import (
    drop_expired,
    ensure_partitions,
    existing_partitions,
    maintain,
    partition_name,
)
from metrics.storage.rollups import floor_to, is_late, late_batch, roll_backlog, rollup
from metrics.storage.writes import (
    COPY_SQL,
    PG_TYPES,
    SMALL_BATCH,
    write_batch,
    write_for_token,
    write_samples,
)

__all__ = [
    "COPY_SQL",
    "PG_TYPES",
    "SMALL_BATCH",
    "datetime_of",
    "drop_expired",
    "ensure_partitions",
    "existing_partitions",
    "floor_to",
    "is_late",
    "is_postgresql",
    "late_batch",
    "maintain",
    "micros_of",
    "partition_name",
    "roll_backlog",
    "rollup",
    "to_micros",
    "write_batch",
    "write_for_token",
    "write_samples",
]
