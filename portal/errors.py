"""Typed errors: every refusal a user can meet, each with its message from SPEC §5.

Views catch ``RuleViolation`` (and only it) and show ``message``; anything else is a bug.
"""

from django.utils.translation import gettext_lazy as _


class RuleViolation(Exception):
    code = "rule_violation"
    status = 409
    default_message = _("요청을 처리할 수 없습니다.")

    def __init__(self, message=None):
        self.message = message if message is not None else self.default_message
        super().__init__(str(self.message))


class PermissionRequired(RuleViolation):
    code = "permission_required"
    status = 403

    def __init__(self, permission):
        self.permission = str(permission)
        super().__init__(_("%(permission)s 권한이 필요합니다.") % {"permission": self.permission})


class NotFound(RuleViolation):
    code = "not_found"
    status = 404
    default_message = _("대상을 찾을 수 없습니다.")


class InvalidInput(RuleViolation):
    """A value that can never be right (a name too long, a zone that does not exist)."""

    code = "invalid_input"
    status = 422

    def __init__(self, message, field=None):
        self.field = field
        super().__init__(message)


class VmNotEligible(RuleViolation):
    code = "vm_not_eligible"
    default_message = _("동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다")


class SpotOrDrVm(RuleViolation):
    code = "spot_or_dr_vm"
    default_message = _("스팟·재해 복구(DR) 가상머신은 클러스터에 연결할 수 없습니다")


class AlreadyMember(RuleViolation):
    code = "already_member"
    default_message = _("이미 다른 클러스터에 연결된 가상머신입니다")


class NotMember(RuleViolation):
    code = "not_member"
    default_message = _("클러스터에 연결되지 않은 가상머신입니다")


class ClusterChanging(RuleViolation):
    code = "cluster_changing"
    default_message = _("클러스터 상태가 변경되는 중에는 가상머신을 연결하거나 분리할 수 없습니다")


class NotEnoughMembers(RuleViolation):
    code = "not_enough_members"
    default_message = _("가상머신 2대 이상이 필요합니다")


class MembersStillRunning(RuleViolation):
    code = "members_still_running"
    default_message = _("실행 중인 가상머신이 있으면 먼저 모든 가상머신을 종료해야 합니다")


class ClusterNotRunning(RuleViolation):
    code = "cluster_not_running"
    default_message = _("클러스터가 실행중일 때만 멤버 가상머신을 시작할 수 있습니다")


class InvalidTransition(RuleViolation):
    code = "invalid_transition"
    default_message = _("현재 상태에서는 이 작업을 할 수 없습니다")


class FabricNotOffered(RuleViolation):
    code = "fabric_not_offered"
    status = 422
    default_message = _("선택한 인스턴스 유형은 이 가용 영역에서 해당 패브릭을 지원하지 않습니다")


class NameTaken(RuleViolation):
    code = "name_taken"
    status = 422
    default_message = _("이 프로젝트에 같은 이름의 클러스터가 이미 있습니다")


class VmNameTaken(InvalidInput):
    code = "vm_name_taken"

    def __init__(self):
        super().__init__(_("이 프로젝트에 같은 이름의 가상머신이 이미 있습니다"), field="name")


class CapacityUnavailable(RuleViolation):
    code = "capacity_unavailable"
    default_message = _("가용 영역의 자원이 부족하여 시작할 수 없습니다. 잠시 후 다시 시도하세요")


class BackendError(RuleViolation):
    code = "backend_error"
    default_message = _("컴퓨트 백엔드 오류로 작업을 완료하지 못했습니다")


class VmNotStopped(RuleViolation):
    code = "vm_not_stopped"
    default_message = _("중지된 가상머신만 분리하거나 삭제할 수 있습니다")


class VmIsMember(RuleViolation):
    code = "vm_is_member"
    default_message = _("클러스터에 연결된 가상머신은 먼저 클러스터에서 분리해야 합니다")
