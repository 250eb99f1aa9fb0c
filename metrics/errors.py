"""The ingest API's refusals, in the portal's error hierarchy
(``portal.foundation.errors.RuleViolation``).

Each class is one stable ``code`` the agent can act on and one HTTP ``status``; the message
says precisely what was wrong (which sample, which field) and is translated when raised. The
view answers a problem document (``portal.foundation.problems``: ``code``, ``detail`` the
message …); metrics/README.md lists them, ``metrics.openapi`` documents them.
"""

from django.utils.translation import gettext_lazy as _

from portal.foundation.errors import RuleViolation


class IngestError(RuleViolation):
    """A batch refused whole: nothing of it is stored."""

    code = "invalid"
    status = 400


class Unauthorized(IngestError):
    code = "unauthorized"
    status = 401
    default_message = _("유효하지 않은 토큰입니다.")


class WrongVm(IngestError):
    code = "wrong_vm"
    status = 403


class TooLarge(IngestError):
    code = "too_large"
    status = 413


class TooManySamples(IngestError):
    code = "too_many_samples"
    status = 413


class UnsupportedEncoding(IngestError):
    code = "unsupported_encoding"
    status = 415


class RateLimited(IngestError):
    code = "rate_limited"
    status = 429


class Duplicate(IngestError):
    """A sample of the batch is already stored: the agent re-sent a batch that had landed."""

    code = "duplicate"
    status = 409
    default_message = _(
        "이미 저장된 시각의 샘플이 있어 이 배치는 저장하지 않았습니다 (다시 보낸 배치)."
    )


class Invalid(IngestError):
    """The body's shape is wrong (not an object, an empty list, a bad ``vm``...)."""


class BadGzip(IngestError):
    code = "bad_gzip"


class MalformedJson(IngestError):
    code = "malformed_json"


class NotFinite(IngestError):
    code = "not_finite"


class UnknownField(IngestError):
    code = "unknown_field"


class MissingField(IngestError):
    code = "missing_field"


class NotANumber(IngestError):
    code = "not_a_number"


class Negative(IngestError):
    code = "negative"


class OutOfRange(IngestError):
    code = "out_of_range"


class TooOld(IngestError):
    code = "too_old"


class InFuture(IngestError):
    code = "in_future"


class DuplicateTimestamp(IngestError):
    """Two samples of the batch at the same instant, at the stored (microsecond) resolution."""

    code = "duplicate_ts"


class NotInCluster(IngestError):
    """``GET /api/metrics/cluster`` for a VM in no cluster: nothing of any cluster is told."""

    code = "no_cluster"
    status = 404
    default_message = _("이 가상머신은 클러스터의 멤버가 아닙니다.")
