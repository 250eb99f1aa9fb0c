"""A cluster's 교체 정책 (docs/rules.md#a-clusters-policy): who may set it, what is kept."""

import pytest

from clusters import operations, policy
from clusters.models import ClusterStatus, Operation, ReplacePolicy, VirtualCluster
from portal.foundation import errors
from portal.models import AuditEvent


def test_the_default_is_notify_and_a_change_keeps_who_and_when_audited(world):
    cluster = world.cluster()
    assert cluster.policy == ReplacePolicy.NOTIFY and cluster.policy_set_by is None
    operation, _cluster = operations.policy_op(cluster.pk, actor=world.admin, policy="auto")
    assert operation.kind == Operation.Kind.POLICY and operation.done
    cluster.refresh_from_db()
    assert cluster.policy == ReplacePolicy.AUTO
    assert cluster.policy_set_by == world.admin and cluster.policy_set_at is not None
    event = AuditEvent.objects.get(action="cluster.policy")
    assert event.outcome == AuditEvent.Outcome.SUCCEEDED and event.message == "자동 교체"
    under = policy.acting_under(cluster)
    assert under["policy"] == "auto" and under["set_by"] == "admin" and under["set_at"]


@pytest.mark.parametrize(
    ("who", "value", "error"),
    [
        ("viewer", "auto", errors.PermissionRequired),
        ("other", "auto", errors.ClusterNotFound),
        ("admin", "sometimes", errors.PolicyInvalid),
        ("admin", None, errors.PolicyInvalid),
    ],
)
def test_refusals_change_nothing(world, who, value, error):
    cluster = world.cluster()
    with pytest.raises(error):
        operations.policy_op(cluster.pk, actor=world.users[who], policy=value)
    cluster.refresh_from_db()
    assert cluster.policy == ReplacePolicy.NOTIFY and cluster.policy_set_by is None
    assert not Operation.objects.filter(kind=Operation.Kind.POLICY).exists()


def test_a_deleted_cluster_keeps_its_policy(world):
    cluster = world.cluster(status=ClusterStatus.DELETED)
    with pytest.raises(errors.InvalidTransition):
        policy.set_policy(cluster.pk, actor=world.admin, policy="propose")
    assert VirtualCluster.objects.get(pk=cluster.pk).policy == ReplacePolicy.NOTIFY
    assert policy.preflight_policy(world.users["viewer"], world.cluster("b")) is not None
