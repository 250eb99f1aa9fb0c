"""Authenticating, bounding, validating and storing an agent's batch (metrics/README.md).

A batch is ``{"vm": <id, optional>, "samples": [{"ts": <unix seconds>, "cpu_util": …}, …]}``
with the fields of ``metrics.models.METRIC_FIELDS``, or the same as ``"fields"`` + ``"rows"``
(see ``validate``). It is checked whole before anything is
written, and written in one statement, so it is stored entirely or not at all.

Validation runs per column with C-level builtins (``map``, ``min``, ``max``, ``sum``) rather
than per value in Python: a 1,000-sample backlog batch costs about as much to check as to
COPY, which keeps the endpoint within reach of a raw COPY (``bench_metrics``). Only when a
check fails does a Python loop look for the first offending sample, to name it.

Every refusal is a ``metrics.errors.IngestError``: nothing of a refused batch is stored.
"""

import hashlib
import json
import operator
import zlib

import orjson
from django.utils.translation import gettext as _

from metrics import conf, errors, storage
from metrics.ingest.checks import NUMBER, check_column, first_bad, shown
from metrics.ingest.devices import DEVICE_KEYS, device_columns
from metrics.models import METRIC_FIELDS, MetricsToken
from portal.iam.throttle import Counter
from vms.models import VmStatus

TOKEN_PREFIX = "vcm_"  # noqa: S105 - the tokens' prefix, not a secret
SAMPLE_KEYS = ("ts", *(name for name, *_rest in METRIC_FIELDS))
# The host fields, then the optional per-device arrays (``metrics.ingest.devices``).
ALL_KEYS = (*SAMPLE_KEYS, *DEVICE_KEYS)
KNOWN_KEYS = frozenset(ALL_KEYS)
TOP_KEYS = frozenset({"vm", "samples", "fields", "rows"})
_column_getters = [operator.itemgetter(key) for key in SAMPLE_KEYS]
_all_getters = [operator.itemgetter(key) for key in ALL_KEYS]
BIGINT = (-(2**63), 2**63 - 1)  # what an id column holds
RATE_WINDOW_SECONDS = 60
RATE = Counter("metrics-rate")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Who is writing


def bearer_hash(request) -> str:
    """The SHA-256 of the request's bearer token, or ``Unauthorized`` if there is none."""
    header = request.headers.get("Authorization", "")
    scheme, _sep, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX) or len(token) > 100:
        raise errors.Unauthorized(_("Bearer 토큰이 필요합니다."))
    return hash_token(token)


def lookup(token_hash: str) -> int:
    """The VM id of a token hash, or ``Unauthorized``. The token of a deleted VM no longer
    writes."""
    return lookup_member(token_hash)[0]


def lookup_member(token_hash: str) -> tuple[int, int | None]:
    """(VM id, its cluster's id or None) of a token hash, in one query: what a batch is
    written for and stamped with. ``Unauthorized`` as ``lookup``."""
    rows = (
        MetricsToken.objects.filter(token_hash=token_hash)
        .exclude(vm__status=VmStatus.DELETED)
        .values_list("vm_id", "vm__cluster_id")
    )
    for vm_id, cluster_id in rows[:1]:
        return vm_id, cluster_id
    raise errors.Unauthorized()


def authenticate(request) -> int:
    """The VM id of the request's bearer token, or ``Unauthorized``."""
    return lookup(bearer_hash(request))


def check_rate(token_hash: str) -> bool:
    """Count this request against the token's window: ``RateLimited`` past
    ``METRICS_RATE_PER_MINUTE``. Returns whether a window was open. If none was, nothing is
    counted or created here: ``store`` opens it once the token is verified, so made-up tokens
    never take a cache entry (see ``portal.iam.throttle``). One cache operation either way.

    With the local-memory cache each process counts on its own; with Redis (CACHE_URL) the
    bound is global.
    """
    limit = conf.get("METRICS_RATE_PER_MINUTE")
    count = RATE.hit_open(_rate_key(token_hash))
    if count > limit:
        raise errors.RateLimited(
            _("요청이 너무 많습니다. 분당 %(limit)d회까지 보낼 수 있습니다.") % {"limit": limit}
        )
    return count > 0


def _rate_key(token_hash):
    return token_hash[:32]  # half the hash: unique enough, and not what a lookup takes


def store(
    token_hash: str,
    claimed_vm: int | None,
    columns: list,
    now: float,
    counted: bool,
    devices: dict | None = None,
) -> bool:
    """Store a validated batch for the token's VM; then, unless ``check_rate`` has
    ``counted`` it, open the token's rate window with this request. Returns whether the
    agent's call was noted with it (``metrics.liveness``); if not, the caller notes it.

    An on-time agent-sized batch is one statement that checks the token as it inserts and
    notes the call (``storage.write_for_token``); anything else looks the token up first.
    Raises ``Unauthorized``, ``WrongVm`` (``claimed_vm`` is not the token's) or
    ``Duplicate``.
    """
    try:
        noted = storage.write_for_token(token_hash, claimed_vm, columns, now, devices)
        if not noted:
            vm_id, cluster_id = lookup_member(token_hash)
            if claimed_vm is not None and claimed_vm != vm_id:
                message = _("이 토큰으로는 가상머신 %(vm)s의 메트릭만 기록할 수 있습니다.")
                raise errors.WrongVm(message % {"vm": vm_id})
            backlog = storage.late_batch(vm_id, columns[0], now)
            storage.write_batch(vm_id, columns, backlog, devices, cluster_id=cluster_id)
    except errors.Duplicate:
        _count_verified(token_hash, counted)  # a re-sent batch: the token was good
        raise
    _count_verified(token_hash, counted)
    return noted


def _count_verified(token_hash, counted):
    if not counted:
        RATE.open(_rate_key(token_hash), RATE_WINDOW_SECONDS)


# ---------------------------------------------------------------------------------------------
# What is written


def read_body(request) -> bytes:
    """The body, gunzipped if sent with ``Content-Encoding: gzip`` (the agent compresses
    large batches), refusing (413) one larger than ``METRICS_MAX_BODY_BYTES`` either way."""
    limit = conf.get("METRICS_MAX_BODY_BYTES")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in {"identity", "gzip"}:
        raise errors.UnsupportedEncoding(
            _("지원하지 않는 Content-Encoding입니다: %(name)s") % {"name": shown(encoding)}
        )
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise errors.TooLarge(_too_large_message(limit))
    body = request.read(limit + 1)
    if len(body) > limit:
        raise errors.TooLarge(_too_large_message(limit))
    if encoding == "identity":
        return body
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        data = inflater.decompress(body, limit + 1)  # bounded: no gzip bomb
    except zlib.error as exc:
        raise errors.BadGzip(
            _("gzip 본문을 풀 수 없습니다: %(reason)s") % {"reason": exc}
        ) from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise errors.TooLarge(_too_large_message(limit))
    if not inflater.eof:
        raise errors.BadGzip(_("gzip 본문이 중간에 끊겼습니다."))
    return data


def _too_large_message(limit):
    return _("요청 본문이 너무 큽니다 (최대 %(limit)d바이트).") % {"limit": limit}


def parse(body: bytes):
    """The JSON document; NaN and Infinity are not JSON and are named as such when refused."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        reason = str(exc)
    # Slow path, errors only: find out whether the culprit is a NaN/Infinity literal. A body
    # nested deeper than orjson's limit is as deep for ``json`` (RecursionError): malformed.
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except _NonFinite as exc:
        raise errors.NotFinite(
            _("%(value)s 값은 허용되지 않습니다: 유한한 숫자만 보낼 수 있습니다.")
            % {"value": exc.args[0]},
        ) from None
    except (ValueError, RecursionError):
        pass
    raise errors.MalformedJson(_("JSON 형식이 아닙니다: %(reason)s") % {"reason": reason})


class _NonFinite(ValueError):
    pass


def _refuse_constant(name):
    raise _NonFinite(name)


def validate(payload, now: float) -> tuple[int | None, list, dict]:
    """``(claimed VM id or None, columns, devices)`` for ``store``, or ``IngestError``. The
    columns are the instants (``storage.to_micros``: integer microseconds, the stored
    resolution), then ``METRIC_NAMES``; ``devices`` the per-GPU and per-port columns
    (``metrics.ingest.devices.device_columns``), empty when no sample has any.

    Two equivalent forms: ``{"samples": [{"ts": …, "cpu_util": …}, …]}`` (readable, for
    people and scripts) and ``{"fields": ["ts", "cpu_util", …], "rows": [[…], …]}`` (what the
    agent sends: field names once, half the bytes, and rows transpose into columns in C).
    """
    if type(payload) is not dict:
        raise errors.Invalid(_("본문은 JSON 객체여야 합니다."))
    unknown = payload.keys() - TOP_KEYS
    if unknown:
        raise errors.UnknownField(_("알 수 없는 필드: %(name)s") % {"name": sorted(unknown)[0]})
    claimed_vm = payload.get("vm")
    if "vm" in payload and (
        type(claimed_vm) is not int or not BIGINT[0] <= claimed_vm <= BIGINT[1]
    ):
        raise errors.Invalid(_("vm은 가상머신 ID(정수)여야 합니다."))
    where = "rows" if "rows" in payload or "fields" in payload else "samples"
    if where == "rows" and "samples" in payload:
        raise errors.Invalid(_("samples와 rows를 함께 보낼 수 없습니다."))
    items = payload.get(where)
    if type(items) is not list or not items:
        raise errors.Invalid(_("%(where)s는 비어 있지 않은 배열이어야 합니다.") % {"where": where})
    limit = conf.get("METRICS_MAX_BATCH_SAMPLES")
    if len(items) > limit:
        raise errors.TooManySamples(
            _("한 번에 보낼 수 있는 샘플은 최대 %(limit)d개입니다 (받은 개수 %(count)d).")
            % {"limit": limit, "count": len(items)},
        )
    if where == "rows":
        columns = _columns_of_rows(payload.get("fields"), items)
    else:
        columns = _columns_of_samples(items)
    columns, lists = columns[: len(SAMPLE_KEYS)], columns[len(SAMPLE_KEYS) :]
    columns[0] = _instants(columns[0], now, where)
    for index, (name, nullable, lowest, highest) in enumerate(METRIC_FIELDS, start=1):
        check_column(columns[index], name, nullable, lowest, highest, where)
    return claimed_vm, columns, device_columns(lists, columns[0], where)


def _missing_required(present):
    return [
        name
        for name, nullable, *_rest in (("ts", False), *METRIC_FIELDS)
        if not nullable and name not in present
    ]


def _columns_of_rows(fields, rows):
    """Columns in ``ALL_KEYS`` order from the compact form; absent optional fields null."""
    if type(fields) is not list or not all(type(f) is str for f in fields):
        raise errors.Invalid(_("fields는 필드 이름의 배열이어야 합니다."))
    unknown = [f for f in fields if f not in KNOWN_KEYS]
    if unknown:
        raise errors.UnknownField(_("알 수 없는 필드: %(name)s") % {"name": shown(unknown[0])})
    if len(set(fields)) != len(fields):
        raise errors.Invalid(_("fields에 같은 이름이 두 번 있습니다."))
    missing = _missing_required(fields)
    if missing:
        raise errors.MissingField(_("필수 필드 %(name)s가 없습니다.") % {"name": missing[0]})
    if set(map(type, rows)) != {list} or set(map(len, rows)) != {len(fields)}:
        index = next(i for i, r in enumerate(rows) if type(r) is not list or len(r) != len(fields))
        raise errors.Invalid(
            _("rows[%(i)d]: fields와 같은 길이(%(n)d)의 배열이어야 합니다.")
            % {"i": index, "n": len(fields)},
        )
    by_name = dict(zip(fields, zip(*rows, strict=True), strict=True))
    absent = (None,) * len(rows)
    return [by_name.get(key, absent) for key in ALL_KEYS]


def _columns_of_samples(samples):
    """Columns in ``ALL_KEYS`` order from sample objects; unknown or missing keys refused."""
    if set(map(type, samples)) != {dict}:
        index = next(i for i, s in enumerate(samples) if type(s) is not dict)
        raise errors.Invalid(_("samples[%(i)d]: JSON 객체여야 합니다.") % {"i": index})
    lengths = set(map(len, samples))
    for length, getters in ((len(SAMPLE_KEYS), _column_getters), (len(ALL_KEYS), _all_getters)):
        if lengths != {length}:
            continue
        try:
            # Every sample has exactly the known keys: one C-level pass per column.
            columns = [list(map(getter, samples)) for getter in getters]
        except KeyError:
            break
        absent = [None] * len(samples)
        return columns + [absent] * (len(ALL_KEYS) - len(columns))
    # Slow path: name the first unknown key, or fill absent optional fields with null.
    rows = []
    for index, sample in enumerate(samples):
        extra = sample.keys() - KNOWN_KEYS
        if extra:
            raise errors.UnknownField(
                _("samples[%(i)d]: 알 수 없는 필드 %(name)s")
                % {"i": index, "name": shown(sorted(extra)[0])},
            )
        missing = _missing_required(sample)
        if missing:
            raise errors.MissingField(
                _("samples[%(i)d]: 필수 필드 %(name)s가 없습니다.")
                % {"i": index, "name": missing[0]},
            )
        rows.append(tuple(sample.get(key) for key in ALL_KEYS))
    return list(zip(*rows, strict=True))


def _instants(column, now, where):
    """The batch's instants in stored microseconds, once every ``ts`` is a number in the
    accepted window and no two are equal at that resolution (two timestamps a fraction of a
    microsecond apart would be stored as one: refused as duplicates, not half stored)."""
    if not set(map(type, column)) <= NUMBER:
        index = first_bad(column, lambda v: type(v) in NUMBER)
        raise errors.NotANumber(
            _("%(where)s[%(i)d].ts: 유닉스 시각(초)이어야 합니다 (받은 값 %(value)s).")
            % {"where": where, "i": index, "value": shown(column[index])},
        )
    oldest = now - conf.get("METRICS_MAX_AGE_SECONDS")
    newest = now + conf.get("METRICS_MAX_FUTURE_SECONDS")
    if min(column) < oldest:
        index = first_bad(column, lambda v: v >= oldest)
        raise errors.TooOld(
            _("%(where)s[%(i)d].ts: %(days)g일보다 오래된 샘플은 받지 않습니다.")
            % {"where": where, "i": index, "days": conf.get("METRICS_MAX_AGE_SECONDS") / 86400},
        )
    if max(column) > newest:
        index = first_bad(column, lambda v: v <= newest)
        raise errors.InFuture(
            _(
                "%(where)s[%(i)d].ts: 서버 시각보다 %(seconds)d초 넘게 미래입니다. "
                "시계를 확인하세요."
            )
            % {"where": where, "i": index, "seconds": conf.get("METRICS_MAX_FUTURE_SECONDS")},
        )
    micros = storage.to_micros(column)
    if len(set(micros)) != len(micros):
        first: dict[int, int] = {}
        index = next(i for i, m in enumerate(micros) if first.setdefault(m, i) != i)
        raise errors.DuplicateTimestamp(
            _(
                "%(where)s[%(i)d].ts: %(where)s[%(first)d]과 같은 시각입니다 (마이크로초 단위). "
                "같은 시각의 샘플은 하나만 보낼 수 있습니다."
            )
            % {"where": where, "i": index, "first": first[micros[index]]},
        )
    return micros
