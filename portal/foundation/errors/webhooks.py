"""A project's webhooks' refusals (docs/rules.md#webhooks), typed like every other
(``portal.foundation.errors.RuleViolation``); ``portal.webhooks.models`` imports it, so it is
registered wherever a webhook is."""

from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import InvalidInput, NotFound

MAX_URL_LENGTH = 2000
# Webhooks a project may hold: each event is one delivery per webhook subscribed to it.
MAX_WEBHOOKS_PER_PROJECT = 20


class WebhookNotFound(NotFound):
    code = "webhook_not_found"
    default_message = _("웹훅을 찾을 수 없습니다.")


class WebhookNameTaken(InvalidInput):
    code = "webhook_name_taken"
    field = "name"
    default_message = _("이 프로젝트에 같은 이름의 웹훅이 이미 있습니다.")


class WebhookUrlRefused(InvalidInput):
    """The base of every refusal of a webhook's URL: nothing is saved."""

    code = "webhook_url_invalid"
    field = "url"
    default_message = _(
        "웹훅 URL이 올바르지 않습니다. http:// 또는 https://로 시작하는 주소를 입력하세요."
    )


class WebhookUrlScheme(WebhookUrlRefused):
    code = "webhook_url_scheme"
    default_message = _(
        "웹훅 URL은 http:// 또는 https://만 쓸 수 있습니다(입력한 스킴: %(scheme)s)."
    )


class WebhookUrlCredentials(WebhookUrlRefused):
    code = "webhook_url_credentials"
    default_message = _(
        "웹훅 URL에 사용자 이름이나 비밀번호를 넣을 수 없습니다. 받는 쪽은 서명으로 "
        "요청을 확인하세요."
    )


class WebhookUrlTooLong(WebhookUrlRefused):
    code = "webhook_url_too_long"
    default_message = _("웹훅 URL은 %(max)d자까지 입력할 수 있습니다.")


class WebhookUrlAddress(WebhookUrlRefused):
    code = "webhook_url_address"
    default_message = _(
        "이 주소(%(address)s)로는 웹훅을 보낼 수 없습니다. 사설·루프백·링크 로컬 주소는 "
        "이 포털에서 허용하지 않습니다."
    )


class WebhookEventsRequired(InvalidInput):
    code = "webhook_events_required"
    field = "events"
    default_message = _("받을 이벤트를 하나 이상 고르세요.")


class WebhookEventUnknown(InvalidInput):
    code = "webhook_event_unknown"
    field = "events"
    default_message = _("알 수 없는 이벤트 유형입니다: %(name)s")


class WebhookLimit(InvalidInput):
    code = "webhook_limit"
    status = 409
    field = "name"
    default_message = _("한 프로젝트에는 웹훅을 %(max)d개까지 둘 수 있습니다.")
