"""The refusals of 클러스터 검증 and 교체 (issue 14), in the portal's error hierarchy.

Kept beside the feature (as ``metrics.errors`` is) rather than in ``portal.errors``; each
message lives only here. Importing this module registers the codes, so stored ones render.
"""

from django.utils.translation import gettext_lazy as _

from portal.errors import InvalidInput, RuleViolation


class NotEnoughRunningMembers(RuleViolation):
    code = "validate_needs_running_members"
    default_message = _("실행중인 멤버 가상머신이 2대 이상일 때 검증할 수 있습니다")


class ValidationRunning(RuleViolation):
    code = "validation_running"
    default_message = _("이 클러스터의 검증이 이미 진행 중입니다")


class LevelInvalid(InvalidInput):
    code = "diag_level_invalid"
    field = "level"
    default_message = _("dcgmi diag 수준은 1 또는 2만 선택할 수 있습니다.")


class SpareIsMember(InvalidInput):
    code = "spare_is_member"
    field = "spare"
    default_message = _("교체할 멤버와 다른 예비 가상머신을 선택하세요.")


class MemberChanging(RuleViolation):
    code = "member_changing"
    default_message = _("시작하거나 중지하는 중인 멤버는 교체할 수 없습니다")


class ReplaceStopFailed(RuleViolation):
    code = "replace_stop_failed"
    default_message = _("멤버를 중지하지 못해 교체를 멈췄습니다")
