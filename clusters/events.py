"""What a cluster tells its project's webhooks (docs/webhooks.md#events), each said here once:
its status moving (``move_cluster``, the one way a cluster's status changes), a 검증 run's
verdicts, a 교체 starting and ending, a member's health changing (``vms.health``). Each is
written in the transaction of the change (``portal.webhooks.events.emit``) and sent by the
webhooks' worker after it commits."""

from typing import Any

from clusters.models import LIFECYCLE, Operation, Verdict, VirtualCluster
from portal.foundation.kernel import set_status
from portal.webhooks.events import cluster_ref, emit
from portal.webhooks.models import EventType
from vms.models import VirtualMachine

# A run's verdict: its worst member's (정상 < 점검 필요 < 불량 < 응답 없음).
WORST_FIRST = (Verdict.NO_ANSWER, Verdict.BAD, Verdict.WARN, Verdict.OK)


def move_cluster(cluster: VirtualCluster, status: str, *, error_code: str = "") -> None:
    """``set_status`` on the cluster's lifecycle; a status that changes is sent as
    ``cluster.status_changed`` with the previous one (and the error that sent it back, if
    any)."""
    previous = cluster.status
    set_status(cluster, status, LIFECYCLE)
    if previous != status:
        data = {
            "cluster": cluster_ref(cluster),
            "previous_status": previous,
            "status": status,
            "error_code": error_code or None,
        }
        emit(cluster.project_id, EventType.CLUSTER_STATUS_CHANGED, data)


def _vm_ref(vm: VirtualMachine | None, name: str = "", rank: int | None = None) -> dict:
    if vm is None:
        return {"id": None, "name": name, "node_rank": rank}
    return {"id": vm.pk, "name": vm.name, "node_rank": vm.node_rank if rank is None else rank}


def replacement_started(
    operation: Operation, cluster: VirtualCluster, member: VirtualMachine, spare: VirtualMachine
) -> None:
    data = {
        "operation_id": operation.pk,
        "cluster": cluster_ref(cluster),
        "member": _vm_ref(member),
        "spare": _vm_ref(spare),
    }
    emit(cluster.project_id, EventType.REPLACEMENT_STARTED, data)


def replacement_ended(operation: Operation) -> None:
    """A finished 교체: succeeded when it ended with no error and no failed item."""
    items = list(operation.items.select_related("vm").order_by("position"))
    failed = bool(operation.error_code) or any(item.status == item.Status.FAILED for item in items)
    errors = [item.error_code for item in items if item.error_code]
    data: dict[str, Any] = {
        "operation_id": operation.pk,
        "cluster": {"id": operation.cluster_id, "name": getattr(operation.cluster, "name", "")},
        "member": _vm_ref(items[0].vm, items[0].target_name) if items else None,
        "spare": _vm_ref(items[1].vm, items[1].target_name) if len(items) > 1 else None,
        "error_code": operation.error_code or (errors[0] if errors else None),
    }
    kind = EventType.REPLACEMENT_FAILED if failed else EventType.REPLACEMENT_SUCCEEDED
    emit(operation.project_id, kind, data)


def validation_finished(operation: Operation, level: int, judged: dict, names: dict) -> None:
    """A 검증 run's end: the run's verdict (its worst member's), the count per verdict, and
    each member's verdict with its reasons as stored."""
    verdicts = [verdict for verdict, _reasons in judged.values()]
    worst = next((v for v in WORST_FIRST if v in verdicts), Verdict.OK)
    data = {
        "operation_id": operation.pk,
        "cluster": {"id": operation.cluster_id, "name": getattr(operation.cluster, "name", "")},
        "level": level,
        "verdict": str(worst),
        "counts": {str(v): verdicts.count(v) for v in Verdict.values},
        "members": [
            {"vm_id": vm_id, "name": names.get(vm_id, ""), "verdict": str(v), "reasons": reasons}
            for vm_id, (v, reasons) in judged.items()
        ],
    }
    emit(operation.project_id, EventType.VALIDATION_FINISHED, data)


def member_health_changed(vm: VirtualMachine, before: str, code: str, params: dict) -> None:
    """A VM's health moved (``vms.health``): from what, to what, on which evidence (its code
    and figures; the state a 점검 or 교체 will go back to is the portal's own bookkeeping)."""
    data = {
        "vm": _vm_ref(vm),
        "cluster_id": vm.cluster_id,
        "previous_health": before,
        "health": vm.health,
        "evidence": {"code": code, "params": {k: v for k, v in params.items() if k != "was"}},
    }
    emit(vm.project_id, EventType.MEMBER_HEALTH_CHANGED, data)
