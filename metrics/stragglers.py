"""The straggler rule applied by the beat: each running cluster is judged every minute by its
criteria (``metrics.storage.straggler``, what its 메트릭 tab says), and the verdict is
evidence of its members' health (``vms.health``)."""

from datetime import datetime

from clusters.models import ClusterStatus, VirtualCluster
from metrics.storage import charts
from metrics.storage import straggler as rule
from vms import health
from vms.models import VirtualMachine, VmHealth


def sweep(now: datetime | None = None) -> list[health.Change]:
    """Each running cluster judged by its straggler criteria (``metrics.storage.straggler``,
    what its 메트릭 tab says): the member named is 의심, with its GPU and gap; one 의심 for
    being the straggler that the rule, able to judge, no longer names is 정상 again."""
    changes: list[health.Change] = []
    running = VirtualCluster.objects.filter(status=ClusterStatus.RUNNING)
    for cluster in running.only("pk", "instance_type_id", "fabric_type"):
        criteria = rule.criteria_for(cluster)
        seconds = (2 * criteria.minutes + 1) * 60  # the window the rule looks back over
        members, replaced = charts.members_over(cluster, seconds, now)
        view = rule.device_view(members, seconds, now, replaced=replaced, criteria=criteria)
        named = view.straggler
        ids = {name: vm_id for vm_id, name in members}
        if named is not None and named.node in ids:
            device = "GPU" if named.device is None else f"GPU {named.device}"
            change = health.straggler(ids[named.node], device, -named.gap, criteria.minutes)
            changes += [change] if change else []
        if not view.judged:
            continue
        still = ids.get(named.node) if named is not None else None
        cleared = VirtualMachine.objects.filter(
            cluster=cluster, health=VmHealth.SUSPECT, health_code=health.STRAGGLER
        ).values_list("pk", flat=True)
        for vm_id in (pk for pk in cleared if pk != still):
            change = health.apply_health(
                vm_id, health.STRAGGLER_GONE, {"minutes": criteria.minutes}
            )
            changes += [change] if change else []
    return changes
