"""The clusters app's models: clusters and operations (``clusters``), 클러스터 검증
(``validation``), the live clusters' tally (``tally``), a cluster's SSH key pair (``keys``).
Django finds them here; import them from ``clusters.models``."""

from clusters.models.clusters import (
    ALLOWED,
    DELETABLE,
    HOLDS_RESOURCES,
    LIFECYCLE,
    MEMBERSHIP_OPEN,
    MIN_MEMBERS,
    STABLE,
    STARTABLE,
    STOPPABLE,
    TRANSITIONAL,
    ClusterOp,
    ClusterPolicy,
    ClusterSpare,
    ClusterStatus,
    MemberStates,
    Operation,
    OperationItem,
    OperationQuerySet,
    ReplacePolicy,
    VirtualCluster,
    VirtualClusterQuerySet,
)
from clusters.models.keys import ClusterKey
from clusters.models.tally import LiveClusterTally
from clusters.models.validation import (
    ValidationBaseline,
    ValidationJob,
    ValidationRun,
    ValidationThreshold,
    ValidationVerdict,
    Verdict,
)

__all__ = [
    "ALLOWED",
    "ClusterKey",
    "ClusterOp",
    "ClusterPolicy",
    "ClusterSpare",
    "ClusterStatus",
    "DELETABLE",
    "HOLDS_RESOURCES",
    "LIFECYCLE",
    "LiveClusterTally",
    "MEMBERSHIP_OPEN",
    "MIN_MEMBERS",
    "MemberStates",
    "Operation",
    "OperationItem",
    "OperationQuerySet",
    "ReplacePolicy",
    "STABLE",
    "STARTABLE",
    "STOPPABLE",
    "TRANSITIONAL",
    "ValidationBaseline",
    "ValidationJob",
    "ValidationRun",
    "ValidationThreshold",
    "ValidationVerdict",
    "Verdict",
    "VirtualCluster",
    "VirtualClusterQuerySet",
]
