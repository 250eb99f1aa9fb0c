"""The metrics settings, each with its default, read when used so tests can override them.

A ``METRICS_*`` name in Django settings wins; failing that the environment variable of the
same name (so an operator, or ``bench_metrics`` starting gunicorn, can set one without a
settings change); failing that the default here.
"""

import functools
import os
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # Ingest (metrics/README.md): one batch is at most this many samples and this many bytes.
    "METRICS_MAX_BATCH_SAMPLES": 1000,
    "METRICS_MAX_BODY_BYTES": 1024 * 1024,
    # A sample older than this is refused (the agent's buffer holds about a week at 10 s).
    "METRICS_MAX_AGE_SECONDS": 7 * 86400,
    # A sample further in the future than this is refused (clock skew allowance).
    "METRICS_MAX_FUTURE_SECONDS": 300,
    # Requests per token per minute; an agent sends 6, a backlog flush a few dozen.
    "METRICS_RATE_PER_MINUTE": 120,
    # Requests per token per minute to the job endpoints (클러스터 검증), counted apart from
    # ingest: an agent polls 6 times and posts a few results.
    "METRICS_JOBS_RATE_PER_MINUTE": 60,
    # A running member whose agent has not called for this long is 의심 (metrics.liveness,
    # vms.health): it calls every 10 s at least; each process notes a call at most every 15 s.
    "METRICS_AGENT_SILENT_SECONDS": 45,
    # Retention. Raw samples must outlive METRICS_MAX_AGE_SECONDS: a late batch needs its
    # day's partition, and the rollups of its buckets are recomputed from raw rows.
    "METRICS_RAW_RETENTION_DAYS": 8,
    "METRICS_MINUTE_RETENTION_DAYS": 8,
    "METRICS_HOUR_RETENTION_DAYS": 400,
    # Day partitions created ahead of today.
    "METRICS_PARTITIONS_AHEAD_DAYS": 2,
    # /metrics/federate/ (metrics.federate): the function that maps a scrape to a project,
    # and the default one's "<project slug>=<sha256 hex of token>,…" pairs.
    "METRICS_SCRAPE_AUTH": "metrics.federate.token_from_settings",
    "METRICS_SCRAPE_TOKENS": "",
}


@functools.cache
def get(name):
    """Cached: the ingest path asks several times a request, and a missing Django setting
    costs an exception each time. ``override_settings`` (tests) clears the cache."""
    if hasattr(settings, name):
        return getattr(settings, name)
    default = DEFAULTS[name]
    raw = os.environ.get(name)
    return default if raw is None else type(default)(raw)


@receiver(setting_changed)
def _forget(setting, **kwargs):
    if setting.startswith("METRICS_"):
        get.cache_clear()
