"""What an audit event says, kept as a code and params and rendered in the reader's language.

Refusals and failures use the error codes of ``portal.foundation.errors``; the few things an
event says that are not errors are the notices below. Action names get their labels here too.
"""

from collections.abc import Callable
from typing import Any

from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from portal.foundation.errors import RuleViolation

NOTICES = {
    "members_detached": _("멤버 %(count)d대를 분리했습니다."),
    "reconcile_started": _("시간 초과된 전환을 복구합니다."),
    "operation_done": _("%(total)d대 중 %(failed)d대 실패"),
    "operation_all_done": _("%(total)d대 모두 성공"),
    "operation_queued": _("%(total)d대 작업을 시작했습니다."),
    # An accepted cluster start: the 활동 tab says how it ended (clusters.outcome.start_finals).
    "start_requested": _("클러스터 시작을 요청했습니다."),
    "validation_done": _(
        "정상 %(ok)d대, 점검 필요 %(warn)d대, 불량 %(bad)d대, 응답 없음 %(silent)d대"
    ),
    "gpu_xid": _("GPU %(gpu)d에서 XID %(xid)d 오류가 발생했습니다."),
    "gpu_ecc_uncorrectable": _(
        "GPU %(gpu)d에서 정정할 수 없는 ECC 오류가 발생했습니다 (누적 %(count)d건)."
    ),
    "gpu_remapped_rows": _("GPU %(gpu)d의 메모리 행이 재매핑되었습니다 (누적 %(count)d행)."),
    "guest_shutdown": _("게스트가 내부에서 종료되어 중지됨으로 표시합니다."),
    "guest_crashed": _("게스트가 비정상 종료되어 중지됨으로 표시합니다."),
    "domain_destroyed": _("도메인이 포털 밖에서 강제 종료되어 중지됨으로 표시합니다."),
    "domain_stopped": _("도메인이 포털 밖에서 중지되어 중지됨으로 표시합니다."),
    "domain_missing": _("호스트에 도메인이 없어 중지됨으로 표시합니다."),
    "stray_domain": _("어떤 가상머신에도 속하지 않는 도메인 %(name)s이 있습니다 (삭제하지 않음)."),
    "port_link_down": _("패브릭 포트 %(port)d의 링크가 끊어졌습니다 (누적 %(count)d회)."),
    "host_synced": _("장치 %(count)d개를 읽었습니다."),
    # A VM's health evidence (``vms.health``); the GPU errors above are evidence too.
    "health_agent_silent": _("에이전트가 %(seconds)d초 넘게 응답하지 않았습니다."),
    "health_agent_back": _("에이전트가 다시 응답합니다."),
    "health_guest_crashed": _("실행 중이어야 할 게스트가 비정상 종료되었습니다."),
    "health_domain_destroyed": _("실행 중이어야 할 도메인이 포털 밖에서 강제 종료되었습니다."),
    "health_straggler": _(
        "%(device)s 사용률의 클러스터 중앙값과의 차이 %(gap).1f%%p가 %(minutes)d분 동안 "
        "이어졌습니다."
    ),
    "health_straggler_gone": _(
        "최근 %(minutes)d분 동안 클러스터 중앙값과의 차이가 기준 안에 있습니다."
    ),
    "health_validation_running": _("클러스터 검증으로 점검합니다."),
    "health_validation_ok": _("클러스터 검증에서 정상으로 판정되었습니다."),
    "health_validation_bad": _("클러스터 검증에서 불량으로 판정되었습니다."),
    "health_replacing": _("교체 중입니다 (예비 가상머신: %(spare)s)."),
    "health_joined": _("교체로 합류했습니다 (%(member)s 대신)."),
    # What started an automatic operation under a cluster's 교체 정책 (clusters.outcome).
    "replace_joined": _(
        "예비 가상머신이 교체로 합류해 그 링크를 확인합니다 (작업 #%(operation)d)."
    ),
    "policy_acted": _(
        "%(policy)s 정책(%(who)s, %(at)s 설정)에 따라 시스템이 시작했습니다. 근거: %(member)s — "
        "%(why)s"
    ),
}

# What a notice says after its sentence, from params a %-format cannot put in words (a
# 검증's reasons), by the app that owns those words (``vms.health`` registers its own).
DETAILS: dict[str, Callable[[dict[str, Any]], str]] = {}

ACTION_LABELS = {
    "cluster.create": _("클러스터 생성"),
    "cluster.provisioned": _("클러스터 준비 완료"),
    "cluster.start": _("클러스터 시작"),
    "cluster.allocated": _("자원 할당"),
    "cluster.waiting": _("패브릭 구성"),
    "cluster.running": _("클러스터 실행"),
    "cluster.stop": _("클러스터 중지"),
    "cluster.delete": _("클러스터 삭제"),
    "cluster.update": _("클러스터 이름 변경"),
    "cluster.ssh_keys": _("클러스터 SSH 키 변경"),
    "cluster.spare_add": _("예비 가상머신 추가"),
    "cluster.spare_remove": _("예비 가상머신 제외"),
    "cluster.policy": _("교체 정책 변경"),
    "cluster.policy_act": _("교체 정책에 따른 조치"),
    "cluster.reconcile": _("전환 복구"),
    "vm.create": _("가상머신 생성"),
    "vm.update": _("가상머신 이름 변경"),
    "vm.attach": _("클러스터에 연결"),
    "vm.detach": _("클러스터에서 분리"),
    "vm.start": _("가상머신 시작"),
    "vm.running": _("가상머신 실행"),
    "vm.stop": _("가상머신 중지"),
    "vm.stopped": _("가상머신 중지 완료"),
    "vm.stray_domain": _("소속 없는 도메인 발견"),
    "vm.delete": _("가상머신 삭제"),
    "vm.metrics_token": _("메트릭 토큰 발급"),
    "vm.metrics_token_revoke": _("메트릭 토큰 폐기"),
    "operation.attach": _("가상머신 연결"),
    "operation.detach": _("가상머신 분리"),
    "operation.start_members": _("멤버 시작"),
    "operation.stop_members": _("멤버 중지"),
    "operation.stop_cluster": _("멤버와 함께 클러스터 중지"),
    "operation.create_vms": _("가상머신 생성"),
    "operation.replace": _("교체"),
    "operation.validate": _("클러스터 검증"),
    "operation.cancel": _("작업 취소"),
    "cluster.validated": _("클러스터 검증 완료"),
    "vm.gpu_error": _("GPU 오류"),
    "vm.link_down": _("패브릭 링크 끊김"),
    "vm.health_ok": _("건강 상태: 정상"),
    "vm.health_suspect": _("건강 상태: 의심"),
    "vm.health_checking": _("건강 상태: 점검 중"),
    "vm.health_isolated": _("건강 상태: 격리"),
    "vm.health_replacing": _("건강 상태: 교체 중"),
    "token.create": _("API 토큰 발급"),
    "token.revoke": _("API 토큰 폐기"),
    "ssh_key.create": _("SSH 키 등록"),
    "ssh_key.delete": _("SSH 키 삭제"),
    "webhook.create": _("웹훅 등록"),
    "webhook.delete": _("웹훅 삭제"),
    "webhook.test": _("웹훅 테스트 전송"),
    "host.create": _("GPU 호스트 등록"),
    "host.update": _("GPU 호스트 변경"),
    "host.delete": _("GPU 호스트 삭제"),
    "host.sync": _("GPU 호스트 동기화"),
}

# What an event is about, one of a kind (an audit row names one target).
TARGET_LABELS = {
    "cluster": pgettext_lazy("target", "클러스터"),
    "vm": pgettext_lazy("target", "가상머신"),
    "api_token": pgettext_lazy("target", "API 토큰"),
    "ssh_key": pgettext_lazy("target", "SSH 키"),
    "webhook": pgettext_lazy("target", "웹훅"),
    "gpu_host": pgettext_lazy("target", "GPU 호스트"),
}


# What the 가상머신 연결 dialog says beside a VM that is not stopped (%(status)s is its status
# label); the attach rule's other refusals name their fact themselves (``RuleViolation.short``).
NOT_STOPPED_REASON = _("%(status)s — 먼저 중지하세요")
STOPPING_REASON = _("%(status)s — 중지가 끝나면 연결할 수 있습니다")


def render_message(
    code: str, params: dict[str, Any] | None, text: str = "", *, details: bool = True
) -> str:
    """An event's message in the active language: its code rendered (with its ``DETAILS``,
    unless ``details`` is false: the headline alone), then its plain text."""
    params = params or {}
    if code in NOTICES:
        rendered = NOTICES[code] % params if params else str(NOTICES[code])
        detail = DETAILS[code](params) if details and code in DETAILS else ""
        rendered = f"{rendered} {detail}" if detail else rendered
    elif code:
        rendered = RuleViolation.from_stored(code, params).message
    else:
        return text
    return f"{rendered} ({text})" if text else rendered


def action_label(action: str) -> str:
    return str(ACTION_LABELS.get(action, action))


def target_label(target_type: str) -> str:
    return str(TARGET_LABELS.get(target_type, target_type))
