"""The API's own refusals (tokens, requests the schema refuses, pages, idempotency, rate),
typed like every other (``portal.foundation.errors.RuleViolation``): a code, a status, one message.
"""

from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import InvalidInput, RuleViolation


class TokenRequired(RuleViolation):
    code = "token_required"
    status = 401
    default_message = _("Authorization: Bearer 헤더에 API 토큰이 필요합니다.")


class TokenInvalid(RuleViolation):
    code = "token_invalid"
    status = 401
    default_message = _("유효하지 않은 API 토큰입니다.")


class TokenExpired(RuleViolation):
    code = "token_expired"
    status = 401
    default_message = _("만료된 API 토큰입니다.")


class TokenRevoked(RuleViolation):
    code = "token_revoked"
    status = 401
    default_message = _("폐기된 API 토큰입니다.")


class TokenRoleGone(RuleViolation):
    code = "token_role_gone"
    status = 401
    default_message = _("이 토큰의 프로젝트에 대한 역할이 없어 토큰을 쓸 수 없습니다.")


class RateLimited(RuleViolation):
    code = "rate_limited"
    status = 429
    default_message = _(
        "API 요청 한도를 넘었습니다. 토큰마다 분당 %(limit)d회까지 요청할 수 있습니다."
    )

    def __init__(self, *, limit: int, retry_after: int):
        super().__init__(limit=limit)
        self.retry_after = retry_after


class TokenNameRequired(InvalidInput):
    code = "token_name_required"
    field = "name"
    default_message = _("토큰 이름을 1~100자로 입력하세요.")


class TokenDaysInvalid(InvalidInput):
    code = "token_days_invalid"
    field = "days"
    default_message = _("유효 기간은 1~%(max)d일로 입력하세요.")


class TokenLimitReached(InvalidInput):
    code = "token_limit_reached"
    default_message = _(
        "사용 가능한 API 토큰은 사용자마다 %(max)d개까지입니다. 쓰지 않는 토큰을 폐기한 뒤 "
        "다시 발급하세요."
    )


class TokenProjectInvalid(InvalidInput):
    code = "token_project_invalid"
    field = "project"
    default_message = _("역할이 있는 프로젝트만 선택할 수 있습니다.")


class RequestInvalid(InvalidInput):
    """A request the schema refuses (a missing field, a string where an id goes)."""

    code = "request_invalid"
    default_message = _("요청 값이 올바르지 않습니다: %(name)s")


class IdempotencyKeyReused(InvalidInput):
    code = "idempotency_key_reused"
    field = "Idempotency-Key"
    default_message = _("같은 Idempotency-Key로 다른 요청을 보냈습니다. 새 키를 쓰세요.")


class IdempotencyKeyExpired(InvalidInput):
    code = "idempotency_key_expired"
    field = "Idempotency-Key"
    default_message = _("이 Idempotency-Key는 24시간이 지나 다시 쓸 수 없습니다. 새 키를 쓰세요.")


class PageTokenInvalid(InvalidInput):
    code = "page_token_invalid"
    status = 400
    field = "page_token"
    default_message = _("page_token이 올바르지 않습니다. 첫 페이지부터 다시 요청하세요.")


class BodyTooLarge(RuleViolation):
    code = "body_too_large"
    status = 413
    default_message = _("요청 본문이 너무 큽니다. %(max)d바이트까지 보낼 수 있습니다.")


class LengthRequired(RuleViolation):
    code = "length_required"
    status = 411
    default_message = _(
        "요청 본문에 Content-Length가 필요합니다. 청크 전송(Transfer-Encoding)은 받지 않습니다."
    )


class JsonRequired(RuleViolation):
    code = "json_required"
    status = 415
    default_message = _("요청 본문은 Content-Type: application/json 인 JSON이어야 합니다.")


class MethodNotAllowed(RuleViolation):
    code = "method_not_allowed"
    status = 405
    default_message = _("이 경로는 %(method)s 요청을 받지 않습니다.")


class ServerError(RuleViolation):
    code = "server_error"
    status = 500
    default_message = _(
        "서버 오류로 요청을 처리하지 못했습니다. 잠시 후 다시 시도하세요 (요청 ID %(request_id)s)."
    )


class HttpRefusal(RuleViolation):
    """Any other error status the API answers (the words of its HTTP phrase)."""

    code = "http_error"
    default_message = _("요청을 처리할 수 없습니다 (HTTP %(status)d).")

    def __init__(self, status: int):
        super().__init__(status=status)
        self.status = status
