"""Authenticating, bounding and validating an agent's batch (SPEC §7, issue 5).

A batch is ``{"vm": <id, optional>, "samples": [{"ts": <unix seconds>, "cpu_util": …}, …]}``
with the fields of ``metrics.models.METRIC_FIELDS``, or the same as ``"fields"`` + ``"rows"``
(see ``validate``). It is checked whole before anything is
written, and written in one statement, so it is stored entirely or not at all.

Validation runs per column with C-level builtins (``map``, ``min``, ``max``, ``sum``) rather
than per value in Python: a 1,000-sample backlog batch costs about as much to check as to
COPY, which keeps the endpoint within reach of a raw COPY (``bench_metrics``). Only when a
check fails does a Python loop look for the first offending sample, to name it.
"""

import hashlib
import json
import operator
import zlib
from dataclasses import dataclass

import orjson
from django.core.cache import cache
from django.db import connection
from django.utils.translation import gettext as _

from metrics import conf
from metrics.models import METRIC_FIELDS
from vms.models import VmStatus

TOKEN_PREFIX = "vcm_"
SAMPLE_KEYS = ("ts", *(name for name, *_rest in METRIC_FIELDS))
KNOWN_KEYS = frozenset(SAMPLE_KEYS)
TOP_KEYS = frozenset({"vm", "samples", "fields", "rows"})
NUMBER = frozenset({int, float})
NUMBER_OR_NONE = frozenset({int, float, type(None)})
_column_getters = [operator.itemgetter(key) for key in SAMPLE_KEYS]


@dataclass
class IngestError(Exception):
    """A refusal: the HTTP status, a stable code for the agent, a precise message for people."""

    status: int
    code: str
    message: str


def hash_token(token):
    return hashlib.sha256(token.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Who is writing


def bearer_hash(request):
    """The SHA-256 of the request's bearer token, or ``IngestError`` 401 if there is none."""
    header = request.headers.get("Authorization", "")
    scheme, _sep, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX) or len(token) > 100:
        raise IngestError(401, "unauthorized", _("Bearer 토큰이 필요합니다."))
    return hash_token(token)


def lookup(token_hash):
    """The (token id, VM id) of a token hash, or ``IngestError`` 401.

    One indexed query; the token of a deleted VM no longer writes.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.id, t.vm_id FROM metrics_metricstoken t "
            "JOIN vms_virtualmachine v ON v.id = t.vm_id "
            "WHERE t.token_hash = %s AND v.status <> %s",
            [token_hash, VmStatus.DELETED],
        )
        row = cursor.fetchone()
    if row is None:
        raise IngestError(401, "unauthorized", _("유효하지 않은 토큰입니다."))
    return row


def authenticate(request):
    """The (token id, VM id) of the request's bearer token, or ``IngestError`` 401."""
    return lookup(bearer_hash(request))


def check_rate(token_id, now):
    """At most ``METRICS_RATE_PER_MINUTE`` requests per token per clock minute (429).

    A fixed window in the cache: one increment per request. With the local-memory cache
    each process counts on its own; with Redis (CACHE_URL) the bound is global.
    """
    limit = conf.get("METRICS_RATE_PER_MINUTE")
    window = int(now // 60)
    key = f"metrics:rate:{token_id}:{window}"
    try:
        count = cache.incr(key)
    except ValueError:  # first request of this window
        cache.set(key, 1, 120)
        count = 1
    if count > limit:
        raise IngestError(
            429, "rate_limited",
            _("요청이 너무 많습니다. 분당 %(limit)d회까지 보낼 수 있습니다.") % {"limit": limit},
        )
    return 60 - int(now % 60)


# ---------------------------------------------------------------------------------------------
# What is written


def read_body(request):
    """The body, gunzipped if sent with ``Content-Encoding: gzip`` (the agent compresses
    large batches), refusing (413) one larger than ``METRICS_MAX_BODY_BYTES`` either way."""
    limit = conf.get("METRICS_MAX_BODY_BYTES")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in {"identity", "gzip"}:
        raise IngestError(415, "unsupported_encoding",
                          _("지원하지 않는 Content-Encoding입니다: %(name)s") % {"name": encoding})
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise IngestError(413, "too_large", _too_large_message(limit))
    body = request.read(limit + 1)
    if len(body) > limit:
        raise IngestError(413, "too_large", _too_large_message(limit))
    if encoding == "identity":
        return body
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        data = inflater.decompress(body, limit + 1)  # bounded: no gzip bomb
    except zlib.error as exc:
        raise IngestError(400, "bad_gzip", _("gzip 본문을 풀 수 없습니다: %(reason)s")
                          % {"reason": exc}) from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise IngestError(413, "too_large", _too_large_message(limit))
    if not inflater.eof:
        raise IngestError(400, "bad_gzip", _("gzip 본문이 중간에 끊겼습니다."))
    return data


def _too_large_message(limit):
    return _("요청 본문이 너무 큽니다 (최대 %(limit)d바이트).") % {"limit": limit}


def parse(body):
    """The JSON document; NaN and Infinity are not JSON and are named as such when refused."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        reason = str(exc)
    # Slow path, errors only: find out whether the culprit is a NaN/Infinity literal.
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except _NonFinite as exc:
        raise IngestError(
            400, "not_finite",
            _("%(value)s 값은 허용되지 않습니다: 유한한 숫자만 보낼 수 있습니다.")
            % {"value": exc.args[0]},
        ) from None
    except ValueError:
        pass
    raise IngestError(
        400, "malformed_json", _("JSON 형식이 아닙니다: %(reason)s") % {"reason": reason}
    )


class _NonFinite(ValueError):
    pass


def _refuse_constant(name):
    raise _NonFinite(name)


def validate(payload, vm_id, now):
    """The batch as columns for ``storage.write_batch`` (``ts`` in Unix seconds, then
    ``METRIC_NAMES``), or ``IngestError``.

    Two equivalent forms: ``{"samples": [{"ts": …, "cpu_util": …}, …]}`` (readable, for
    people and scripts) and ``{"fields": ["ts", "cpu_util", …], "rows": [[…], …]}`` (what the
    agent sends: field names once, half the bytes, and rows transpose into columns in C).
    """
    if type(payload) is not dict:
        raise IngestError(400, "invalid", _("본문은 JSON 객체여야 합니다."))
    unknown = payload.keys() - TOP_KEYS
    if unknown:
        raise IngestError(
            400, "unknown_field", _("알 수 없는 필드: %(name)s") % {"name": sorted(unknown)[0]}
        )
    if "vm" in payload and type(payload["vm"]) is not int:
        raise IngestError(400, "invalid", _("vm은 가상머신 ID(정수)여야 합니다."))
    if "vm" in payload and payload["vm"] != vm_id:
        raise IngestError(
            403, "wrong_vm",
            _("이 토큰으로는 가상머신 %(vm)s의 메트릭만 기록할 수 있습니다.") % {"vm": vm_id},
        )
    where = "rows" if "rows" in payload or "fields" in payload else "samples"
    if where == "rows" and "samples" in payload:
        raise IngestError(400, "invalid", _("samples와 rows를 함께 보낼 수 없습니다."))
    items = payload.get(where)
    if type(items) is not list or not items:
        raise IngestError(
            400, "invalid", _("%(where)s는 비어 있지 않은 배열이어야 합니다.") % {"where": where}
        )
    limit = conf.get("METRICS_MAX_BATCH_SAMPLES")
    if len(items) > limit:
        raise IngestError(
            413, "too_many_samples",
            _("한 번에 보낼 수 있는 샘플은 최대 %(limit)d개입니다 (받은 개수 %(count)d).")
            % {"limit": limit, "count": len(items)},
        )
    if where == "rows":
        columns = _columns_of_rows(payload.get("fields"), items)
    else:
        columns = _columns_of_samples(items)
    _check_timestamps(columns[0], now, where)
    for index, (name, nullable, lowest, highest) in enumerate(METRIC_FIELDS, start=1):
        _check_column(columns[index], name, nullable, lowest, highest, where)
    return columns


def _missing_required(present):
    return [name for name, nullable, *_rest in (("ts", False), *METRIC_FIELDS)
            if not nullable and name not in present]


def _columns_of_rows(fields, rows):
    """Columns in ``SAMPLE_KEYS`` order from the compact form; absent optional fields null."""
    if type(fields) is not list or not all(type(f) is str for f in fields):
        raise IngestError(400, "invalid", _("fields는 필드 이름의 배열이어야 합니다."))
    unknown = [f for f in fields if f not in KNOWN_KEYS]
    if unknown:
        raise IngestError(
            400, "unknown_field", _("알 수 없는 필드: %(name)s") % {"name": unknown[0]}
        )
    if len(set(fields)) != len(fields):
        raise IngestError(400, "invalid", _("fields에 같은 이름이 두 번 있습니다."))
    missing = _missing_required(fields)
    if missing:
        raise IngestError(
            400, "missing_field", _("필수 필드 %(name)s가 없습니다.") % {"name": missing[0]}
        )
    if set(map(type, rows)) != {list} or set(map(len, rows)) != {len(fields)}:
        index = next(i for i, r in enumerate(rows) if type(r) is not list or len(r) != len(fields))
        raise IngestError(
            400, "invalid",
            _("rows[%(i)d]: fields와 같은 길이(%(n)d)의 배열이어야 합니다.")
            % {"i": index, "n": len(fields)},
        )
    by_name = dict(zip(fields, zip(*rows, strict=True), strict=True))
    absent = (None,) * len(rows)
    return [by_name.get(key, absent) for key in SAMPLE_KEYS]


def _columns_of_samples(samples):
    """Columns in ``SAMPLE_KEYS`` order from sample objects; unknown or missing keys refused."""
    if set(map(type, samples)) != {dict}:
        index = next(i for i, s in enumerate(samples) if type(s) is not dict)
        raise IngestError(400, "invalid", _("samples[%(i)d]: JSON 객체여야 합니다.") % {"i": index})
    if set(map(len, samples)) == {len(SAMPLE_KEYS)}:
        try:
            # Every sample has exactly the known keys: one C-level pass per column.
            return [list(map(getter, samples)) for getter in _column_getters]
        except KeyError:
            pass
    # Slow path: name the first unknown key, or fill absent optional fields with null.
    rows = []
    for index, sample in enumerate(samples):
        extra = sample.keys() - KNOWN_KEYS
        if extra:
            raise IngestError(
                400, "unknown_field",
                _("samples[%(i)d]: 알 수 없는 필드 %(name)s")
                % {"i": index, "name": sorted(extra)[0]},
            )
        missing = _missing_required(sample)
        if missing:
            raise IngestError(
                400, "missing_field",
                _("samples[%(i)d]: 필수 필드 %(name)s가 없습니다.")
                % {"i": index, "name": missing[0]},
            )
        rows.append(tuple(sample.get(key) for key in SAMPLE_KEYS))
    return list(zip(*rows, strict=True))


def _first_bad(column, ok):
    return next(i for i, value in enumerate(column) if not ok(value))


def _check_column(column, name, nullable, lowest, highest, where):
    types = set(map(type, column))
    if not types <= (NUMBER_OR_NONE if nullable else NUMBER):
        index = _first_bad(column, lambda v: v is None and nullable or type(v) in NUMBER)
        raise IngestError(
            400, "not_a_number",
            _("%(where)s[%(i)d].%(name)s: 숫자여야 합니다 (받은 값 %(value)s).")
            % {"where": where, "i": index, "name": name, "value": json.dumps(column[index])},
        )
    values = [v for v in column if v is not None] if type(None) in types else column
    if not values:
        return
    # No NaN can get here: orjson refuses NaN and Infinity (see ``parse``), and the
    # comparisons below would not be reliable with one.
    if min(values) >= lowest and max(values) <= highest:
        return
    index = _first_bad(column, lambda v: v is None or lowest <= v <= highest)
    value = column[index]
    if value < 0:
        code, message = "negative", _(
            "%(where)s[%(i)d].%(name)s: 음수는 허용되지 않습니다 (받은 값 %(value)s)."
        )
    else:
        code, message = "out_of_range", _(
            "%(where)s[%(i)d].%(name)s: %(low)g 이상 %(high)g 이하여야 합니다 (받은 값 %(value)s)."
        )
    raise IngestError(400, code, message % {
        "where": where, "i": index, "name": name, "value": value, "low": lowest, "high": highest,
    })


def _check_timestamps(column, now, where):
    if not set(map(type, column)) <= NUMBER:
        index = _first_bad(column, lambda v: type(v) in NUMBER)
        raise IngestError(
            400, "not_a_number",
            _("%(where)s[%(i)d].ts: 유닉스 시각(초)이어야 합니다 (받은 값 %(value)s).")
            % {"where": where, "i": index, "value": json.dumps(column[index])},
        )
    oldest = now - conf.get("METRICS_MAX_AGE_SECONDS")
    newest = now + conf.get("METRICS_MAX_FUTURE_SECONDS")
    if min(column) < oldest:
        index = _first_bad(column, lambda v: v >= oldest)
        raise IngestError(
            400, "too_old",
            _("%(where)s[%(i)d].ts: %(days)g일보다 오래된 샘플은 받지 않습니다.")
            % {"where": where, "i": index, "days": conf.get("METRICS_MAX_AGE_SECONDS") / 86400},
        )
    if max(column) > newest:
        index = _first_bad(column, lambda v: v <= newest)
        raise IngestError(
            400, "in_future",
            _("%(where)s[%(i)d].ts: 서버 시각보다 %(seconds)d초 넘게 미래입니다. "
              "시계를 확인하세요.")
            % {"where": where, "i": index, "seconds": conf.get("METRICS_MAX_FUTURE_SECONDS")},
        )
    if len(set(column)) != len(column):
        raise IngestError(400, "duplicate_ts", _("같은 시각의 샘플이 두 번 들어 있습니다."))
