"""The two refusals of 클러스터 검증 that no ``portal.errors`` class names yet.

``portal.errors`` holds every rule's message, once (the structure test checks it), and is
not this feature's to edit; until these move there as classes, they are raised with their
words given (``message=``), which the audit keeps as text. Everything else 검증 and 교체
refuse with reuses the SPEC §5 errors (``NotEnoughMembers``, ``AlreadyMember``…).
"""

from django.utils.translation import gettext_lazy as _

from portal.errors import InvalidInput, RuleViolation


def validation_running() -> RuleViolation:
    return RuleViolation(message=_("이 클러스터의 검증이 이미 진행 중입니다"))


def level_invalid() -> InvalidInput:
    text = _("dcgmi diag 수준은 1 또는 2만 선택할 수 있습니다.")
    return InvalidInput(message=text, field="level")
