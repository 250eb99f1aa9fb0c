"""Counting events per key in windows (``Counter``), and login throttling with it: after repeated
failures, refuse logins for a while, per username and per client address (SPEC §3 hardening,
issue 6 item 5). The metrics ingest API's per-token rate limit counts with the same helper.

Counting lives on Django's ``user_login_failed`` / ``user_logged_in`` signals and refusing in
``ThrottledModelBackend``, so every way in — the console's login page and the admin's — is
throttled in one place. The login page also asks ``blocked()`` first so it can answer with the
Korean message and 429 instead of the generic "wrong password".

Counters live in Django's default cache. With several web processes it must be shared
(``CACHE_URL=redis://...``); the local-memory default counts per process, and keeps at most
300 entries, evicting the least recently used. So that no traffic can evict a failed-login
counter (issue 9 item 4), nothing counts per value an anonymous client can vary at will: the
ingest limit opens a token's window only once the token is verified (one entry per issued
token, however many requests), and an attempt refused while throttled adds no counter for a
new username.
A second cache just for login counters was the alternative; it needs a settings entry in
every deployment, and leaves the cache open to the next per-request key someone adds.

Hand-written rather than a library: django-ratelimit counts in one cache alias with
clock-aligned windows (a burst of twice the limit across a boundary; a lockout that may end a
second after it began) around request-shaped keys, while login failures are counted in auth
signals where there may be no request; django-axes keeps failures in the database (robust)
but needs its own app, middleware and backend, replaces the login flow, and does nothing for
the ingest limit, which would keep a second mechanism.
"""

import hashlib
import ipaddress

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _

MESSAGE = _("로그인 시도가 너무 많습니다. 잠시 후 다시 시도하세요.")


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


class Counter:
    """Events per key in Django's default cache, in windows that open at a key's first event
    and last the ``seconds`` given then (not clock-aligned: a lockout lasts its full length
    from the first failure, and a limit never allows twice its count across a boundary).

    Each key is one cache entry whatever the number of events: count only keys whose number
    is bounded (see the module docstring).
    """

    def __init__(self, prefix: str):
        self.prefix = prefix

    def _entry(self, key: str) -> str:
        return f"{self.prefix}:{key}"

    def counts(self, keys: list[str]) -> dict[str, int]:
        """{key: events in its open window} (0 for none); reads only, creates nothing."""
        found = cache.get_many([self._entry(key) for key in keys])
        return {key: found.get(self._entry(key), 0) for key in keys}

    def hit(self, key: str, seconds: int) -> int:
        """Count one event; returns the events in the key's window so far, this one included.
        One cache operation while a window is open (atomic on Redis)."""
        return self.hit_open(key) or self.open(key, seconds)

    def hit_open(self, key: str) -> int:
        """Count one event in the key's open window and return the events in it so far; 0,
        counting and creating nothing, when no window is open."""
        try:
            return cache.incr(self._entry(key))
        except ValueError:
            return 0

    def open(self, key: str, seconds: int) -> int:
        """Open the key's window with one event (if a concurrent event opened it first, count
        in that one); returns the events in it."""
        entry = self._entry(key)
        if cache.add(entry, 1, timeout=seconds):
            return 1
        count = self.hit_open(key)
        if count:
            return count
        cache.set(entry, 1, timeout=seconds)  # ...and it has expired already
        return 1

    def reset(self, key: str) -> None:
        cache.delete(self._entry(key))


LOGIN_FAILURES = Counter("login-fail")


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


class ThrottledModelBackend(ModelBackend):
    """Django's ModelBackend, refusing (without checking the password) while throttled."""

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
