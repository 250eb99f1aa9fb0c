"""A cluster's 교체 정책 (docs/rules.md#a-clusters-policy): what a member judged 불량 leads
to — 알림만 (the default: the notification only), 교체 제안 (the console proposes the
replace with the spare it would take; one click does it), 자동 교체 (the system starts it).

The policy is set by a user with CLUSTER UPDATE; who set it and when are kept with it, and
whatever the system does under it names them (``acting_under``)."""

from clusters.locking import lock_cluster
from clusters.models import ClusterPolicy, ClusterStatus, ReplacePolicy, VirtualCluster
from portal.foundation.audit import attempt
from portal.foundation.errors import InvalidTransition, PolicyInvalid, RuleViolation
from portal.foundation.kernel import Actor, permission_refusal, raise_if, recorded_user
from portal.iam.permissions import Perm


def policy_refusal(cluster: VirtualCluster) -> RuleViolation | None:
    """Any cluster but a deleted one."""
    return InvalidTransition() if cluster.status == ClusterStatus.DELETED else None


def preflight_policy(actor: Actor, cluster: VirtualCluster) -> RuleViolation | None:
    return permission_refusal(actor, Perm.CLUSTER_UPDATE, cluster) or policy_refusal(cluster)


def parse_policy(value: object) -> str:
    """One of ``ReplacePolicy``'s values, or ``PolicyInvalid`` (before any row is read)."""
    if not isinstance(value, str) or value not in ReplacePolicy.values:
        raise PolicyInvalid()
    return value


def set_policy(cluster_id: object, *, actor: Actor, policy: object) -> VirtualCluster:
    """The cluster's 교체 정책 (CLUSTER UPDATE, ``policy_refusal``), with who set it and
    when; the same policy again changes nothing but is audited all the same."""
    chosen = parse_policy(policy)
    with attempt("cluster.policy", actor=actor, target_type="cluster") as att:
        cluster = lock_cluster(cluster_id, actor, Perm.CLUSTER_UPDATE, att)
        raise_if(policy_refusal(cluster))
        att.message = str(ReplacePolicy(chosen).label)
        if cluster.policy != chosen:
            row, _made = ClusterPolicy.objects.update_or_create(
                cluster=cluster, defaults={"policy": chosen, "set_by": recorded_user(actor)}
            )
            cluster.policy_row = row
    return cluster


def acting_under(cluster: VirtualCluster) -> dict:
    """What names the policy the system acts under: the policy, who set it, when (ISO)."""
    who = cluster.policy_set_by
    return {
        "policy": cluster.policy,
        "set_by": who.get_username() if who is not None else "",
        "set_at": cluster.policy_set_at.isoformat() if cluster.policy_set_at else "",
    }
