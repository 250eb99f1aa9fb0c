"""Device error events: an XID, new uncorrectable ECC errors, new remapped rows,
a fabric link that went down — found in the minute rollups as they are made, and written as
audit events of the VM (``vm.gpu_error`` / ``vm.link_down``), so they show on the cluster's
활동 tab and as markers on its charts.

Off the ingest path on purpose: comparing each sample with the previous one would cost the
ingest a read per batch. Each rollup run compares every new minute's maximum of the counter
(or the last-XID gauge) with the minute before it, over an hour of history; a counter seen
for the first time above zero counts as new. A rerun over the same minutes finds the same
events and writes none twice (the event carries its minute, ``params["at"]``).
"""

from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from metrics.models import GPU, PORT
from portal.foundation.audit import Attempt, build_event, record_many
from portal.foundation.event_text import render_message
from portal.models import AuditEvent
from vms import health
from vms.models import VirtualMachine

HISTORY = timedelta(hours=1)
# (series, action, notice code, column, XID-like: a new value rather than a larger one)
CHECKS = (
    (GPU, "vm.gpu_error", "gpu_xid", "xid", True),
    (GPU, "vm.gpu_error", "gpu_ecc_uncorrectable", "ecc_uncorrected", False),
    (GPU, "vm.gpu_error", "gpu_remapped_rows", "remapped_rows", False),
    (PORT, "vm.link_down", "port_link_down", "link_downed", False),
)
ACTIONS = ("vm.gpu_error", "vm.link_down")
PARAM = {"xid": "xid"}  # the notice's name for the value; counters are "count"


def _found(series, column, xid_like, start, stop):
    """(vm_id, device, minute, value) where ``column`` changed in [start, stop)."""
    device = series.keys[1]
    changed = "m > 0 AND (prev IS NULL OR m <> prev)" if xid_like else "m > COALESCE(prev, 0)"
    sql = (
        f"SELECT vm_id, {device}, bucket, m FROM ("  # noqa: S608 - names from the models and constants; values are parameters
        f"SELECT vm_id, {device}, bucket, {column}_max AS m, LAG({column}_max) OVER "
        f"(PARTITION BY vm_id, {device} ORDER BY bucket) AS prev "
        f"FROM {series.minute._meta.db_table} WHERE bucket >= %s AND bucket < %s "
        f"AND {column}_max IS NOT NULL) AS w WHERE bucket >= %s AND {changed} "
        f"ORDER BY bucket, vm_id, {device}"
    )
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(sql, [adapt(start - HISTORY), adapt(stop), adapt(start)])
        return cursor.fetchall()


def detect(start: datetime | None, stop: datetime | None) -> int:
    """Write the events of the minutes rolled up in [start, stop); returns how many."""
    if start is None or stop is None or start >= stop:
        return 0
    found = []
    for series, action, code, column, xid_like in CHECKS:
        for vm_id, device, bucket, value in _found(series, column, xid_like, start, stop):
            at = bucket if isinstance(bucket, datetime) else datetime.fromisoformat(bucket)
            if at.tzinfo is None:  # SQLite: naive UTC
                at = at.replace(tzinfo=UTC)
            params = {
                series.keys[1]: device,
                PARAM.get(column, "count"): int(value),
                "at": int(at.timestamp()),
            }
            found.append((vm_id, action, code, params))
    if not found:
        return 0
    vms = VirtualMachine.objects.in_bulk({vm_id for vm_id, *_rest in found})
    existing = AuditEvent.objects.filter(
        action__in=ACTIONS,
        target_type="vm",
        target_id__in=list(vms),
        at__gte=start - HISTORY,
    ).values_list("target_id", "code", "params")
    seen = {(vm_id, code, tuple(sorted(params.items()))) for vm_id, code, params in existing}
    events = []
    for vm_id, action, code, params in found:
        vm = vms.get(vm_id)
        if vm is None or (vm_id, code, tuple(sorted(params.items()))) in seen:
            continue
        attempt = Attempt(action=action, actor=None, target_type="vm")
        attempt.about(vm)
        attempt.notice(code, **params)
        events.append(build_event(attempt, AuditEvent.Outcome.FAILED))
    record_many(events)
    for event in events:  # a GPU error is evidence of the VM's health
        if event.action == "vm.gpu_error" and event.target_id is not None:
            health.gpu_error(event.target_id, event.code, event.params)
    return len(events)


def chart_markers(cluster_id: int, since: datetime) -> dict:
    """{"gpu": [(local time text, label)], "fabric": […]} of the cluster's device error
    events since ``since``, for the charts."""
    panel = {"vm.gpu_error": "gpu", "vm.link_down": "fabric"}
    out: dict[str, list] = {"gpu": [], "fabric": []}
    rows = (
        AuditEvent.objects.filter(
            cluster_id=cluster_id, action__in=ACTIONS, at__gte=since - timedelta(minutes=5)
        )
        .order_by("at")
        .values_list("action", "target_name", "code", "params", "at")[:200]
    )
    for action, node, code, params, at in rows:
        moment = datetime.fromtimestamp(params.get("at", at.timestamp()), tz=at.tzinfo)
        if moment < since:
            continue
        label = f"{node}: {render_message(code, params)}"
        out[panel[action]].append((timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S"), label))
    return out
