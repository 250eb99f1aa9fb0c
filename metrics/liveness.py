"""Whether each VM's agent is still talking to the portal.

The instant of its last authenticated request (a batch, a check, a job poll) is kept on its
``MetricsToken`` by the portal's clock, never the guest's: a paused guest's clock stops with
it, so the instants of its own samples would make it look silent long after it resumed.

An agent calls every few seconds; its instant is rewritten at most every ``WRITE_EVERY``
seconds. An on-time agent batch notes it in the statement that stores the batch
(``metrics.storage.write_for_token``, with ``noted``'s parameters), where the condition holds
for every web process at once and the write commits asynchronously with the samples: an
UPDATE of its own, once each process remembered a token only for itself, was a round trip
and a WAL flush on nearly every POST of a fleet served by several processes
(``bench_ingest_fleet``). Every other call (a late batch, a check, a job poll) goes through
``contact``: one UPDATE per token per ``WRITE_EVERY`` per process.

A running VM whose agent has called since the VM started and not within
``METRICS_AGENT_SILENT_SECONDS`` is silent (its agent stopped, its guest hung or paused):
``vms.health.sweep`` makes such a member 의심. One that has not called yet is starting: not
judged.
"""

import time
from datetime import datetime, timedelta

from django.db.models import F, QuerySet
from django.utils import timezone

from metrics import conf
from metrics.models import MetricsToken
from vms.models import VmStatus

WRITE_EVERY = 15.0  # seconds between two writes of one token's instant by one process
REMEMBERED = 10_000  # tokens a process remembers; then it forgets them (one UPDATE each again)
_written: dict[str, float] = {}  # token hash -> time.monotonic() of this process's last write


def contact(token_hash: str) -> None:
    """Note that the agent of ``token_hash`` called now. Call it once the token is verified:
    a made-up token must not take an entry."""
    now = time.monotonic()
    last = _written.get(token_hash)
    if last is not None and now - last < WRITE_EVERY:
        return
    MetricsToken.objects.filter(token_hash=token_hash).update(last_seen_at=timezone.now())
    if len(_written) >= REMEMBERED:
        _written.clear()
    _written[token_hash] = now


def noted(token_hash: str) -> tuple[datetime, str, datetime]:
    """The parameters of the ingest statement's note of a call (``contact``'s rule, in SQL):
    the instant by the portal's clock, the token hash, and the instant the last note must be
    older than for this one to replace it."""
    now = timezone.now()
    return now, token_hash, now - timedelta(seconds=WRITE_EVERY)


def forget() -> None:
    """Forget this process's writes (tests: the next call writes again)."""
    _written.clear()


def silent_seconds() -> int:
    return int(conf.get("METRICS_AGENT_SILENT_SECONDS"))


def judged(now: datetime | None = None) -> tuple[QuerySet[MetricsToken], datetime]:
    """The tokens of running VMs whose agent called since they started (the others are not
    judged), and the instant a call must be newer than for its agent not to be silent."""
    since = (now or timezone.now()) - timedelta(seconds=silent_seconds())
    tokens = MetricsToken.objects.filter(
        vm__status=VmStatus.RUNNING, last_seen_at__gte=F("vm__status_changed_at")
    )
    return tokens, since


def silent(now: datetime | None = None) -> QuerySet[MetricsToken]:
    """The tokens of the judged VMs whose agent has not called within
    ``METRICS_AGENT_SILENT_SECONDS``."""
    tokens, since = judged(now)
    return tokens.filter(last_seen_at__lt=since)


def calling(now: datetime | None = None) -> QuerySet[MetricsToken]:
    """The tokens of the judged VMs whose agent has called within it."""
    tokens, since = judged(now)
    return tokens.filter(last_seen_at__gte=since)


def silent_vm_ids(vm_ids, now: datetime | None = None) -> set[int]:
    """Those of ``vm_ids`` that run, whose agent called since they started, and not within
    ``METRICS_AGENT_SILENT_SECONDS``: one query."""
    return set(silent(now).filter(vm_id__in=list(vm_ids)).values_list("vm_id", flat=True))
