"""The rule of 클러스터 검증, once, and its preflight (the services' ``*_refusal`` /
``preflight_*`` pattern): a 실행중 cluster with at least two running members and no run
already in progress; CLUSTER UPDATE to start one."""

from clusters.models import MIN_MEMBERS, ClusterStatus, VirtualCluster
from clusters.validation.errors import (
    NotEnoughRunningMembers,
    ValidationNeedsRunningCluster,
    ValidationRunning,
)
from portal.foundation.errors import InvalidTransition, RuleViolation
from portal.foundation.kernel import Actor, Refusal, permission_refusal
from portal.iam.permissions import Perm


def validate_refusal(
    cluster: VirtualCluster, running_members: int, run_open: bool
) -> RuleViolation | None:
    """Each refusal names the fact: a deleted cluster is never validated; one not 실행중
    (미할당 …) must start first; fewer than two *running* members (a stopped member takes no
    part, however many are attached)."""
    if cluster.status == ClusterStatus.DELETED:
        return InvalidTransition()
    if cluster.status != ClusterStatus.RUNNING:
        return ValidationNeedsRunningCluster()
    if running_members < MIN_MEMBERS:
        return NotEnoughRunningMembers()
    if run_open:
        return ValidationRunning()
    return None


def preflight_validate(
    actor: Actor, cluster: VirtualCluster, running_members: int, run_open: bool
) -> Refusal:
    return permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or validate_refusal(
        cluster, running_members, run_open
    )
