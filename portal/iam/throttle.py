"""The portal's one rate limiter (``Counter``: events per key in windows), and login
throttling with it: after repeated failures, refuse logins for a while, per username and per
client address (docs/rules.md#signing-in). The metrics ingest, the agent job endpoints and the API
count their per-token rates with the same ``Counter``.

Counting lives on Django's ``user_login_failed`` / ``user_logged_in`` signals and refusing in
``ThrottledModelBackend``, so every way in — the console's login page and the admin's — is
throttled in one place. The login page also asks ``blocked()`` first so it can answer with the
Korean message and 429 instead of the generic "wrong password".

Where the windows live. Login failures are kept in the database (``DatabaseStore``, table
``portal_throttlewindow``): a lockout must last its full length whatever else happens, and
the cache cannot promise that — the local-memory default keeps 300 entries and evicts the
least recently used, so any per-request key an attacker can multiply (API tokens, metrics
tokens, made-up usernames) flushed lockouts, and even Redis evicts under ``maxmemory``. The
database evicts nothing, is shared by every web process without a setting, and a failed
login is rare enough that one upsert per failure costs nothing. Request rates (ingest, agent
jobs, API) stay in the cache (``CacheStore``, one operation per request on a hot path):
losing one of those windows lets a token's burst through once, it never unlocks an account;
and their keys are verified tokens only, at most ``ApiToken.MAX_ACTIVE_PER_USER`` per user.

Hand-written rather than a library: django-ratelimit counts in one cache alias with
clock-aligned windows (a burst of twice the limit across a boundary; a lockout that may end a
second after it began) around request-shaped keys, while login failures are counted in auth
signals where there may be no request; django-axes keeps failures in the database too but
needs its own app, middleware and backend, replaces the login flow, and does nothing for the
request rates, which would keep a second mechanism.

A lost cache degrades, never fails a request: while the cache's server (``CACHE_URL``) does
not answer, request rates are counted in this process's memory (``FALLBACK``), so requests are
served and still limited, each process on its own; one warning says the outage began and one
line that it ended (``OUTAGE``), and ``/healthz`` reports the cache as degraded
(``cache_check``). Login failures never depend on the cache.
"""

import hashlib
import ipaddress
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis.exceptions
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _

from portal.iam.auth import SessionUserBackend

MESSAGE = _("로그인 시도가 너무 많습니다. 잠시 후 다시 시도하세요.")
log = logging.getLogger(__name__)
T = TypeVar("T")

# What a cache operation raises when the cache's server (not our code) fails: redis-py's
# errors (refused, reset, timed out, still loading, out of memory, read-only) and raw socket
# errors. The local-memory cache raises none of them.
CACHE_ERRORS = (redis.exceptions.RedisError, OSError)
# Where request rates are counted while the cache is lost: this process's memory. Its keys
# are verified tokens only (module docstring), far fewer than it holds.
FALLBACK = LocMemCache("portal.iam.throttle.fallback", {"OPTIONS": {"MAX_ENTRIES": 10_000}})


def now() -> float:
    """The limiter's clock (seconds since the epoch); tests move it instead of sleeping.
    ``DatabaseStore`` windows end by it; ``CacheStore`` entries by the cache's own timeout."""
    return time.time()


def _setting(name, default):
    return getattr(settings, name, default)


def window_seconds():
    return int(_setting("LOGIN_THROTTLE_WINDOW_SECONDS", 900))


def client_address(request):
    """The client's address: REMOTE_ADDR, or the entry ``TRUSTED_PROXY_COUNT`` hops from the
    right of X-Forwarded-For when the portal sits behind that many proxies we run.

    IPv6 clients are bucketed by /64: one host usually holds the whole prefix.
    """
    address = request.META.get("REMOTE_ADDR", "") or ""
    hops = int(_setting("TRUSTED_PROXY_COUNT", 0))
    if hops > 0:
        forwarded = [
            part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        ]
        forwarded = [part for part in forwarded if part]
        if len(forwarded) >= hops:
            address = forwarded[-hops]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64] or "unknown"
    if ip.version == 6 and not ip.ipv4_mapped:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip)


class Outage:
    """Whether the cache failed this process's last operation on it. Logs a warning when an
    outage begins and a line when the cache answers again: one of each per outage, never one
    per request, whatever the number of threads."""

    def __init__(self) -> None:
        self.down = False
        self._lock = threading.Lock()

    def failed(self, exc: Exception) -> None:
        with self._lock:
            began, self.down = not self.down, True
        if began:
            log.warning(
                "cache unreachable (%s: %s): request rates are counted in this process "
                "until it answers again",
                type(exc).__name__,
                exc,
            )

    def answered(self) -> None:
        if not self.down:  # the hot path: no lock while the cache answers
            return
        with self._lock:
            ended, self.down = self.down, False
        if ended:
            log.info("cache answers again: request rates are counted in it")


OUTAGE = Outage()


def _in_cache(operation: Callable[[Any], T]) -> T:
    """``operation(cache)``; ``operation(FALLBACK)`` when the cache's server fails it. An
    operation is done in one place or the other whole, never half in each."""
    try:
        result = operation(cache)
    except CACHE_ERRORS as exc:
        OUTAGE.failed(exc)
        return operation(FALLBACK)
    OUTAGE.answered()
    return result


def cache_check() -> str:
    """``"ok"`` when the cache answers now, else ``"error: <why>"`` (``/healthz``); either
    is noted in ``OUTAGE`` as a count would be."""
    try:
        cache.get("portal:healthz")
    except CACHE_ERRORS as exc:
        OUTAGE.failed(exc)
        return f"error: {type(exc).__name__}"
    OUTAGE.answered()
    return "ok"


def _incr(store: Any, entry: str) -> int:
    try:
        return int(store.incr(entry))
    except ValueError:  # no open window
        return 0


def _open(store: Any, entry: str, seconds: int) -> int:
    if store.add(entry, 1, timeout=seconds):
        return 1
    count = _incr(store, entry)
    if count:
        return count
    store.set(entry, 1, timeout=seconds)  # ...and it has expired already
    return 1


class CacheStore:
    """Windows in Django's default cache: one operation per event once a window is open
    (atomic on Redis). An entry may be evicted: for request rates only (module docstring).
    While the cache's server fails, in ``FALLBACK``: per process, and the windows start again
    in the cache once it answers (a burst let through once, as after an eviction)."""

    def counts(self, entries: list[str]) -> dict[str, int]:
        found = _in_cache(lambda store: store.get_many(entries))
        return {entry: found.get(entry, 0) for entry in entries}

    def hit_open(self, entry: str) -> int:
        return _in_cache(lambda store: _incr(store, entry))

    def open(self, entry: str, seconds: int) -> int:
        return _in_cache(lambda store: _open(store, entry, seconds))

    def hit(self, entry: str, seconds: int) -> int:
        return _in_cache(lambda store: _incr(store, entry) or _open(store, entry, seconds))

    def reset(self, entry: str) -> None:
        _in_cache(lambda store: store.delete(entry))


class DatabaseStore:
    """Windows as rows of ``portal.ThrottleWindow``: never evicted, shared by every process.
    Each event is one statement (an upsert that restarts an expired window); a window that
    opens also sweeps the expired rows, so the table holds only live windows."""

    table = "portal_throttlewindow"

    def _one(self, sql: str, params: list) -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return row[0] if row else 0

    def counts(self, entries: list[str]) -> dict[str, int]:
        from portal.models import ThrottleWindow

        found = dict(
            ThrottleWindow.objects.filter(key__in=entries, expires_at__gt=now()).values_list(
                "key", "count"
            )
        )
        return {entry: found.get(entry, 0) for entry in entries}

    def hit_open(self, entry: str) -> int:
        return self._one(
            f"UPDATE {self.table} SET count = count + 1 WHERE key = %s AND expires_at > %s "  # noqa: S608 - names from the models and constants; values are parameters
            "RETURNING count",
            [entry, now()],
        )

    def hit(self, entry: str, seconds: int) -> int:
        at = now()
        count = self._one(
            f"INSERT INTO {self.table} AS w (key, count, expires_at) VALUES (%s, 1, %s) "  # noqa: S608 - names from the models and constants; values are parameters
            "ON CONFLICT (key) DO UPDATE SET "
            "count = CASE WHEN w.expires_at > %s THEN w.count + 1 ELSE 1 END, "
            "expires_at = CASE WHEN w.expires_at > %s THEN w.expires_at "
            "ELSE excluded.expires_at END RETURNING count",
            [entry, at + seconds, at, at],
        )
        if count == 1:
            from portal.models import ThrottleWindow

            ThrottleWindow.objects.filter(expires_at__lte=at).delete()
        return count

    open = hit  # a window that is open already counts this event in it

    def reset(self, entry: str) -> None:
        from portal.models import ThrottleWindow

        ThrottleWindow.objects.filter(key=entry).delete()


CACHE = CacheStore()
DATABASE = DatabaseStore()


class Counter:
    """Events per key, in windows that open at a key's first event and last the ``seconds``
    given then (not clock-aligned: a lockout lasts its full length from the first failure,
    and a limit never allows twice its count across a boundary). ``store`` says where the
    windows live (``CACHE`` by default, ``DATABASE`` for state no traffic may evict).

    Each key is one entry whatever the number of events: count only keys whose number is
    bounded (see the module docstring).
    """

    def __init__(self, prefix: str, store=CACHE):
        self.prefix = prefix
        self.store = store

    def _entry(self, key: str) -> str:
        return f"{self.prefix}:{key}"

    def counts(self, keys: list[str]) -> dict[str, int]:
        """{key: events in its open window} (0 for none); reads only, creates nothing."""
        found = self.store.counts([self._entry(key) for key in keys])
        return {key: found[self._entry(key)] for key in keys}

    def hit(self, key: str, seconds: int) -> int:
        """Count one event; returns the events in the key's window so far, this one included."""
        return self.store.hit(self._entry(key), seconds)

    def hit_open(self, key: str) -> int:
        """Count one event in the key's open window and return the events in it so far; 0,
        counting and creating nothing, when no window is open."""
        return self.store.hit_open(self._entry(key))

    def open(self, key: str, seconds: int) -> int:
        """Open the key's window with one event (if a concurrent event opened it first, count
        in that one); returns the events in it."""
        return self.store.open(self._entry(key), seconds)

    def reset(self, key: str) -> None:
        self.store.reset(self._entry(key))


LOGIN_FAILURES = Counter("login-fail", store=DATABASE)


def _key(kind, value):
    digest = hashlib.sha256(str(value).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{kind}:{digest}"


def _normalise(username):
    return str(username or "").strip().casefold()[:256]


def _counters(request, username):
    """(counter key, limit) of every counter this attempt is charged to."""
    counters = [(_key("user", _normalise(username)), int(_setting("LOGIN_THROTTLE_PER_USER", 5)))]
    if request is not None:
        counters.append(
            (_key("addr", client_address(request)), int(_setting("LOGIN_THROTTLE_PER_ADDRESS", 20)))
        )
    return counters


def blocked(request, username):
    """True while the username or the client address has used up its failures."""
    counters = _counters(request, username)
    counts = LOGIN_FAILURES.counts([key for key, _limit in counters])
    return any(counts[key] >= limit for key, limit in counters)


def note_failure(request, username):
    """Count a failed login against the username and the address. An attempt refused while
    either is throttled checked no password and counts nothing: otherwise a blocked client
    could still add an entry per made-up username, and evict the counters that block it."""
    if blocked(request, username):
        return
    for key, _limit in _counters(request, username):
        LOGIN_FAILURES.hit(key, window_seconds())


def note_success(request, username):
    """A successful login clears the username's counter (not the address's: an attacker
    with an account of their own must not be able to reset it)."""
    LOGIN_FAILURES.reset(_key("user", _normalise(username)))


class ThrottledModelBackend(SessionUserBackend):
    """Django's ModelBackend, refusing (without checking the password) while throttled; a
    session's user comes with their roles (``portal.iam.auth.SessionUserBackend``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if blocked(request, username):
            # PermissionDenied stops authenticate() at once; user_login_failed still fires.
            raise PermissionDenied(str(MESSAGE))
        return super().authenticate(request, username=username, password=password, **kwargs)


@receiver(user_login_failed, dispatch_uid="portal.iam.throttle.failed")
def _on_login_failed(sender, credentials, request=None, **kwargs):
    username = credentials.get(get_user_model().USERNAME_FIELD, credentials.get("username"))
    note_failure(request, username)


@receiver(user_logged_in, dispatch_uid="portal.iam.throttle.succeeded")
def _on_logged_in(sender, request, user, **kwargs):
    note_success(request, user.get_username())
