"""The portal's one rate limiter (``Counter``: events per key in windows), and login
throttling with it: after repeated failures, refuse logins for a while, per username and per
client address (SPEC §3 hardening). The metrics ingest, the agent job endpoints and the API
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
"""

import hashlib
import ipaddress
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _

from portal.auth import SessionUserBackend

MESSAGE = _("로그인 시도가 너무 많습니다. 잠시 후 다시 시도하세요.")


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


class CacheStore:
    """Windows in Django's default cache: one operation per event once a window is open
    (atomic on Redis). An entry may be evicted: for request rates only (module docstring)."""

    def counts(self, entries: list[str]) -> dict[str, int]:
        found = cache.get_many(entries)
        return {entry: found.get(entry, 0) for entry in entries}

    def hit_open(self, entry: str) -> int:
        try:
            return cache.incr(entry)
        except ValueError:
            return 0

    def open(self, entry: str, seconds: int) -> int:
        if cache.add(entry, 1, timeout=seconds):
            return 1
        count = self.hit_open(entry)
        if count:
            return count
        cache.set(entry, 1, timeout=seconds)  # ...and it has expired already
        return 1

    def hit(self, entry: str, seconds: int) -> int:
        return self.hit_open(entry) or self.open(entry, seconds)

    def reset(self, entry: str) -> None:
        cache.delete(entry)


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
            f"UPDATE {self.table} SET count = count + 1 WHERE key = %s AND expires_at > %s "
            "RETURNING count",
            [entry, now()],
        )

    def hit(self, entry: str, seconds: int) -> int:
        at = now()
        count = self._one(
            f"INSERT INTO {self.table} AS w (key, count, expires_at) VALUES (%s, 1, %s) "
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
    session's user comes with their roles (``portal.auth.SessionUserBackend``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if blocked(request, username):
            # PermissionDenied stops authenticate() at once; user_login_failed still fires.
            raise PermissionDenied(str(MESSAGE))
        return super().authenticate(request, username=username, password=password, **kwargs)


@receiver(user_login_failed, dispatch_uid="portal.throttle.failed")
def _on_login_failed(sender, credentials, request=None, **kwargs):
    username = credentials.get(get_user_model().USERNAME_FIELD, credentials.get("username"))
    note_failure(request, username)


@receiver(user_logged_in, dispatch_uid="portal.throttle.succeeded")
def _on_logged_in(sender, request, user, **kwargs):
    note_success(request, user.get_username())
