"""The refusals of 클러스터 검증 that the rules' errors do not name, in the portal's error
hierarchy (kept beside the feature, as ``metrics.errors`` is); each message lives only here.
Importing this module registers the codes, so stored ones render in any language. 교체 and
the rest of 검증 refuse with the rules' errors (``NotEnoughMembers``, ``AlreadyMember``…).
"""

from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import InvalidInput, RuleViolation


class ValidationRunning(RuleViolation):
    code = "validation_running"
    default_message = _("이 클러스터의 검증이 이미 진행 중입니다")


class ValidationNeedsRunningCluster(RuleViolation):
    """Why 클러스터 검증 is not offered yet on a cluster that is not 실행중 (미할당 …)."""

    code = "validation_cluster_not_running"
    default_message = _("클러스터가 실행중일 때 검증할 수 있습니다. 먼저 클러스터를 시작하세요")


class NotEnoughRunningMembers(RuleViolation):
    """검증 measures running members only: two must run, however many are attached."""

    code = "not_enough_running_members"
    default_message = _("실행중인 멤버가 2대 이상 필요합니다")


class LevelInvalid(InvalidInput):
    code = "diag_level_invalid"
    field = "level"
    default_message = _("dcgmi diag 수준은 1 또는 2만 선택할 수 있습니다.")
