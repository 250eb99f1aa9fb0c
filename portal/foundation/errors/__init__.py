"""Typed errors: every refusal a user can meet, each with its message
(docs/rules.md#error-catalogue lists them all).

An error is a stable ``code`` plus its ``params`` (Zulip's ``JsonableError``): that pair is
what gets stored (a cluster's ``last_error``, an audit event), and ``message`` renders it in
the reader's language when it is shown. Each message text lives in exactly one class here.

Views catch ``RuleViolation`` (and only it) and show ``message``; anything else is a bug.
"""

from typing import Any, ClassVar

from django.utils.translation import gettext_lazy as _


class RuleViolation(Exception):
    """A refusal with a stable code, an HTTP status and a translatable message.

    ``params`` fill the message's ``%(name)s`` placeholders and are stored with the code.
    ``message=`` overrides the class's text for the rare error whose words cannot be named
    by a code (it is then shown as given and cannot be re-rendered in another language).
    """

    code: ClassVar[str] = "rule_violation"
    status: int = 409  # a class's own; an instance may carry another (HttpRefusal)
    default_message: ClassVar[Any] = _("요청을 처리할 수 없습니다.")
    registry: ClassVar[dict[str, type["RuleViolation"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The first class to name a code owns it (a subclass may inherit its parent's).
        RuleViolation.registry.setdefault(cls.code, cls)

    def __init__(self, message: Any = None, **params: Any) -> None:
        self.params = params
        self._override = message
        super().__init__(self.code)

    def msg_format(self) -> Any:
        """The untranslated (lazy) text of this error; ``params`` go into its placeholders."""
        return self.default_message

    @property
    def message(self) -> str:
        """The message in the active language."""
        if self._override is not None:
            return str(self._override)
        text = str(self.msg_format())
        return text % self.params if self.params else text

    @property
    def short(self) -> str:
        """The reason in a few words, where a list names it beside its row (the attach
        dialog's "다른 가용 영역 (kr-central-1b)"): a class's ``short_message``, else
        ``message``."""
        short_message = getattr(self, "short_message", None)
        if short_message is None or self._override is not None:
            return self.message
        return str(short_message) % self.params if self.params else str(short_message)

    def __str__(self) -> str:
        return self.message

    def stored(self) -> dict[str, Any]:
        """What a model keeps of this error: its code and params, never its words."""
        return {"code": self.code, "params": self.params}

    @classmethod
    def from_stored(cls, code: str, params: dict[str, Any] | None = None) -> "RuleViolation":
        """The error a stored code names (an unknown code gives the generic refusal)."""
        error_class = cls.registry.get(code, RuleViolation)
        error = error_class.__new__(error_class)
        RuleViolation.__init__(error, **(params or {}))
        return error


RuleViolation.registry[RuleViolation.code] = RuleViolation


class PermissionRequired(RuleViolation):
    code = "permission_required"
    status = 403
    default_message = _("%(permission)s 권한이 필요합니다.")

    def __init__(self, permission: object) -> None:
        super().__init__(permission=str(permission))

    @property
    def permission(self) -> str:
        return str(self.params["permission"])


class NotFound(RuleViolation):
    code = "not_found"
    status = 404
    default_message = _("대상을 찾을 수 없습니다.")


class ClusterNotFound(NotFound):
    code = "cluster_not_found"
    default_message = _("클러스터를 찾을 수 없습니다.")


class VmNotFound(NotFound):
    code = "vm_not_found"
    default_message = _("가상머신을 찾을 수 없습니다.")


class InvalidInput(RuleViolation):
    """A value that can never be right (a name too long, a zone that does not exist).

    ``field`` names the form field the message belongs to.
    """

    code = "invalid_input"
    status = 422
    field: str | None = None

    def __init__(self, message: Any = None, field: str | None = None, **params: Any) -> None:
        super().__init__(message, **params)
        if field is not None:
            self.field = field


class NulCharacter(InvalidInput):
    """A NUL character (U+0000) in any input: no field may hold one (PostgreSQL cannot
    store it), so the request is refused before any view reads it."""

    code = "nul_character"
    status = 400
    default_message = _("%(name)s 값에 쓸 수 없는 문자(NUL)가 있습니다.")


class NulFilterIgnored(InvalidInput):
    """The console's lists ignore a bad filter value and say so (``NulCharacter``)."""

    code = "nul_filter_ignored"
    status = 400
    default_message = _("주소의 %(name)s 값에 쓸 수 없는 문자(NUL)가 있어 무시했습니다.")


class NameRequired(InvalidInput):
    code = "name_required"
    field = "name"
    default_message = _("이름을 입력하세요.")


class NameTooLong(InvalidInput):
    code = "name_too_long"
    field = "name"
    default_message = _("이름은 %(max)d자 이하로 입력하세요.")


class NameInvalid(InvalidInput):
    code = "name_invalid"
    field = "name"
    default_message = _("이름에는 영문, 숫자, 한글과 하이픈(-)만 쓸 수 있습니다.")


class ZoneRequired(InvalidInput):
    code = "zone_required"
    field = "zone"
    default_message = _("가용 영역을 선택하세요.")


class InstanceTypeRequired(InvalidInput):
    code = "instance_type_required"
    field = "instance_type"
    default_message = _("인스턴스 유형을 선택하세요.")


class InstanceTypeNotOffered(InvalidInput):
    code = "instance_type_not_offered"
    field = "instance_type"
    default_message = _("이 가용 영역에서 제공하지 않는 인스턴스 유형입니다.")


class FabricRequired(InvalidInput):
    code = "fabric_type_required"
    field = "fabric_type"
    default_message = _("패브릭 타입을 선택하세요.")


class BillingTypeRequired(InvalidInput):
    code = "billing_type_required"
    field = "billing_type"
    default_message = _("과금 유형을 선택하세요.")


class VmNameTaken(InvalidInput):
    code = "vm_name_taken"
    field = "name"
    default_message = _("이 프로젝트에 같은 이름의 가상머신이 이미 있습니다")


class VmNotEligible(RuleViolation):
    code = "vm_not_eligible"
    default_message = _("동일한 인스턴스 타입이며 중지된 상태의 가상머신만 연결할 수 있습니다")


class VmInOtherZone(VmNotEligible):
    """Rule 1 naming the fact: the VM's zone (``zone``) is not the cluster's."""

    code = "vm_other_zone"
    default_message = _("다른 가용 영역(%(zone)s)의 가상머신은 이 클러스터에 연결할 수 없습니다")
    short_message = _("다른 가용 영역 (%(zone)s)")


class VmOfOtherInstanceType(VmNotEligible):
    """Rule 1 naming the fact: the VM's instance type (``instance_type``) is not the cluster's."""

    code = "vm_other_instance_type"
    default_message = _(
        "다른 인스턴스 유형(%(instance_type)s)의 가상머신은 이 클러스터에 연결할 수 없습니다"
    )
    short_message = _("인스턴스 유형이 다름 (%(instance_type)s)")


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
    field = "fabric_type"
    default_message = _("선택한 인스턴스 유형은 이 가용 영역에서 해당 패브릭을 지원하지 않습니다")


class NameTaken(RuleViolation):
    code = "name_taken"
    status = 422
    field = "name"
    default_message = _("이 프로젝트에 같은 이름의 클러스터가 이미 있습니다")


class CapacityUnavailable(RuleViolation):
    """Without params, the plain message. A backend that knows what is short
    (``ComputeBackend.shortage``) names it: ``zone``, ``instance_type`` (its GPU model),
    ``fabric``, ``requested`` and ``available`` nodes, and ``room``, the other zones with
    room for the request as ``[[zone, free nodes], …]``."""

    code = "capacity_unavailable"
    default_message = _("가용 영역의 자원이 부족하여 시작할 수 없습니다. 잠시 후 다시 시도하세요")
    named_message = _(
        "%(zone)s의 %(instance_type)s · %(fabric)s 노드가 부족합니다: 요청 %(requested)d노드, "
        "가용 %(available)d노드"
    )
    room_message = _("여유가 있는 영역: %(zones)s")
    zone_room = _("%(zone)s(%(nodes)d노드)")
    no_room_message = _("같은 인스턴스 유형과 패브릭을 제공하는 다른 영역에도 여유가 없습니다")
    retry_message = _("잠시 후 다시 시도하세요")

    @property
    def message(self) -> str:
        if self._override is not None or "requested" not in self.params:
            return super().message
        text = str(self.named_message) % self.params
        room = self.params.get("room")
        if room:
            zones = ", ".join(str(self.zone_room) % {"zone": z, "nodes": n} for z, n in room)
            return f"{text}. {str(self.room_message) % {'zones': zones}}"
        if room is not None:
            return f"{text}. {self.no_room_message}. {self.retry_message}"
        return f"{text}. {self.retry_message}"


class BackendError(RuleViolation):
    code = "backend_error"
    default_message = _("컴퓨트 백엔드 오류로 작업을 완료하지 못했습니다")


class GuestImageMissing(BackendError):
    """The libvirt backend has no guest image to boot (it is built once per host)."""

    code = "guest_image_missing"
    default_message = _(
        "게스트 이미지가 없어 VM을 시작할 수 없습니다. 관리자가 manage.py build_guest_image를 "
        "실행해야 합니다"
    )


class TransitionTimedOut(RuleViolation):
    """Stored by the reconciler on a cluster whose step it had to roll back."""

    code = "transition_timed_out"
    default_message = _("전환이 시간 내에 끝나지 않아 되돌렸습니다.")


class VmNotStopped(RuleViolation):
    code = "vm_not_stopped"
    default_message = _("중지된 가상머신만 분리하거나 삭제할 수 있습니다")


class VmIsMember(RuleViolation):
    code = "vm_is_member"
    default_message = _("클러스터에 연결된 가상머신은 먼저 클러스터에서 분리해야 합니다")


class VmHeldForReplace(RuleViolation):
    code = "vm_held_for_replace"
    default_message = _("진행 중인 교체의 예비 가상머신입니다. 교체가 끝난 뒤 다시 시도하세요")


class SpareIsolated(RuleViolation):
    code = "spare_isolated"
    default_message = _("격리된 가상머신은 교체의 예비 가상머신으로 쓸 수 없습니다")


class VmIsSpare(RuleViolation):
    code = "vm_is_spare"
    default_message = _("클러스터의 예비 가상머신입니다. 먼저 클러스터의 예비 목록에서 제외하세요")


class NotSpare(RuleViolation):
    code = "not_spare"
    default_message = _("이 클러스터의 예비 가상머신이 아닙니다")


class NoSpare(RuleViolation):
    code = "no_spare"
    default_message = _(
        "쓸 수 있는 예비 가상머신이 없습니다. 예비 가상머신을 추가하거나 교체할 가상머신을 고르세요"
    )


class NotCancellable(RuleViolation):
    code = "not_cancellable"
    default_message = _(
        "이 작업은 지금 취소할 수 없습니다. 진행 중인 교체와 클러스터 검증만, 교체는 예비 "
        "가상머신이 합류하기 전까지 취소할 수 있습니다"
    )


class OperationCancelled(RuleViolation):
    code = "operation_cancelled"
    default_message = _("사용자가 작업을 취소했습니다. 클러스터는 작업 전 상태로 돌아갑니다")


class PolicyInvalid(InvalidInput):
    code = "policy_invalid"
    field = "policy"
    default_message = _("교체 정책은 알림만, 교체 제안, 자동 교체 중에서 고르세요.")


class TargetsRequired(InvalidInput):
    code = "vm_ids_required"
    field = "vm_ids"
    default_message = _("가상머신을 하나 이상 선택하세요.")


class TooManyTargets(InvalidInput):
    code = "too_many_targets"
    field = "vm_ids"
    default_message = _("한 번에 최대 %(max)d대까지 처리할 수 있습니다.")


class CountInvalid(InvalidInput):
    code = "count_invalid"
    field = "count"
    default_message = _("개수는 1에서 %(max)d 사이로 입력하세요.")


class IdempotencyConflict(RuleViolation):
    code = "idempotency_conflict"
    default_message = _("같은 Idempotency-Key의 요청이 이미 처리되고 있습니다")


class FilterNotOffered(InvalidInput):
    """An admin list asked for a lookup it does not offer (a query string made by hand):
    refused before it runs, with one answer whatever it would have found."""

    code = "filter_not_offered"
    status = 400
    default_message = _("이 목록에서 쓸 수 없는 필터입니다. 목록에 있는 필터를 사용하세요.")
