"""Day partitions of the raw samples (PostgreSQL only) and retention.

``metrics_sample`` and the per-device ``metrics_gpusample`` / ``metrics_portsample`` are
partitioned by UTC day (migrations 0001, 0003): a partition per table and day the ingest
window accepts and a few ahead, created by the hourly ``maintain_storage`` task (or on the
spot by a write that finds one missing), and dropped whole once retention passes it.
"""

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.utils import timezone

from metrics import conf
from metrics.models import SERIES, ClusterHourRollup, ClusterMinuteRollup, Sample
from metrics.storage.db import is_postgresql, sqlstate

PARTITIONED = tuple(series.raw._meta.db_table for series in SERIES)


def partition_name(day: date, table: str = Sample._meta.db_table) -> str:
    return f"{table}_p{day:%Y%m%d}"


def ensure_partitions(days: Iterable[date]) -> None:
    """Create the day partitions of ``days`` (UTC dates) that do not exist yet, for every
    partitioned table (a batch writes host and device rows together)."""
    if not is_postgresql():
        return
    for table in PARTITIONED:
        _ensure(table, sorted(set(days)))


def _ensure(table, days):
    quote = connection.ops.quote_name
    for day in days:
        lower = datetime(day.year, day.month, day.day, tzinfo=UTC)
        upper = lower + timedelta(days=1)
        # DDL takes no parameters; the bounds are our own ISO dates.
        sql = (
            f"CREATE TABLE IF NOT EXISTS {quote(partition_name(day, table))} "
            f"PARTITION OF {quote(table)} "
            f"FOR VALUES FROM ('{lower.isoformat()}') TO ('{upper.isoformat()}')"
        )
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql)
        except (ProgrammingError, IntegrityError) as exc:
            # Another process created it between IF NOT EXISTS and the catalog insert.
            if sqlstate(exc) not in {"42P07", "23505"}:
                raise


def existing_partitions(table: str = Sample._meta.db_table) -> dict[date, str]:
    """{UTC date: partition name} of ``table``'s day partitions that exist."""
    if not is_postgresql():
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [table],
        )
        names = [name for (name,) in cursor.fetchall()]
    prefix = f"{table}_p"
    found = {}
    for name in names:
        if name.startswith(prefix):
            found[datetime.strptime(name[len(prefix) :], "%Y%m%d").date()] = name
    return found


def maintain(now: datetime | None = None) -> tuple[int, int]:
    """Create partitions for every day a sample may be accepted for (the ingest window and a
    few days ahead), then drop what retention no longer keeps. Returns (created, dropped)."""
    now = now or timezone.now()
    today = now.astimezone(UTC).date()
    first = (now - timedelta(seconds=conf.get("METRICS_MAX_AGE_SECONDS"))).astimezone(UTC).date()
    wanted = {
        first + timedelta(days=i)
        for i in range((today - first).days + conf.get("METRICS_PARTITIONS_AHEAD_DAYS") + 1)
    }
    created = 0
    for table in PARTITIONED if is_postgresql() else ():
        missing = sorted(wanted - set(existing_partitions(table)))
        _ensure(table, missing)
        created += len(missing)
    dropped = drop_expired(now)
    return created, dropped


def drop_expired(now: datetime) -> int:
    """Drop raw samples and rollups older than their retention; returns partitions dropped."""
    raw_cutoff = now - timedelta(days=conf.get("METRICS_RAW_RETENTION_DAYS"))
    dropped = 0
    for series in SERIES:
        if is_postgresql():
            # A day partition goes once all of it is older than the cutoff: no row-by-row
            # delete.
            for day, name in sorted(existing_partitions(series.raw._meta.db_table).items()):
                day_end = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
                if day_end <= raw_cutoff:
                    with connection.cursor() as cursor:
                        cursor.execute(f"DROP TABLE IF EXISTS {connection.ops.quote_name(name)}")
                    dropped += 1
        else:
            series.raw._default_manager.filter(ts__lt=raw_cutoff).delete()
        series.minute._default_manager.filter(
            bucket__lt=now - timedelta(days=conf.get("METRICS_MINUTE_RETENTION_DAYS"))
        ).delete()
        series.hour._default_manager.filter(
            bucket__lt=now - timedelta(days=conf.get("METRICS_HOUR_RETENTION_DAYS"))
        ).delete()
    # The cluster rollups keep as long as the per-VM ones they are made from.
    for model, setting in (
        (ClusterMinuteRollup, "METRICS_MINUTE_RETENTION_DAYS"),
        (ClusterHourRollup, "METRICS_HOUR_RETENTION_DAYS"),
    ):
        model._default_manager.filter(bucket__lt=now - timedelta(days=conf.get(setting))).delete()
    return dropped
