"""Login throttling: after repeated failures, refuse logins for a while, per username and per
client address (SPEC §3 hardening, issue 6 item 5).

Counting lives on Django's ``user_login_failed`` / ``user_logged_in`` signals and refusing in
``ThrottledModelBackend``, so every way in — the console's login page and the admin's — is
throttled in one place. The login page also asks ``blocked()`` first so it can answer with the
Korean message and 429 instead of the generic "wrong password".

Counters are fixed windows in Django's cache (``cache.add`` + ``cache.incr``, both atomic on
Redis). With several web processes the cache must be shared (``CACHE_URL=redis://...``);
a per-process LocMem cache only throttles per process.
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


def _key(kind, value):
    digest = hashlib.sha256(str(value).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"login-fail:{kind}:{digest}"


def _normalise(username):
    return str(username or "").strip().casefold()[:256]


def _counters(request, username):
    """(cache key, limit) of every counter this attempt is charged to."""
    counters = [(_key("user", _normalise(username)), int(_setting("LOGIN_THROTTLE_PER_USER", 5)))]
    if request is not None:
        counters.append(
            (_key("addr", client_address(request)), int(_setting("LOGIN_THROTTLE_PER_ADDRESS", 20)))
        )
    return counters


def blocked(request, username):
    """True while the username or the client address has used up its failures."""
    counters = _counters(request, username)
    counts = cache.get_many([key for key, _limit in counters])
    return any(counts.get(key, 0) >= limit for key, limit in counters)


def note_failure(request, username):
    for key, _limit in _counters(request, username):
        # add() starts the window only if it is not running; incr() is atomic.
        cache.add(key, 0, timeout=window_seconds())
        try:
            cache.incr(key)
        except ValueError:
            # The window expired between add() and incr(): start a new one.
            cache.add(key, 1, timeout=window_seconds())


def note_success(request, username):
    """A successful login clears the username's counter (not the address's: an attacker
    with an account of their own must not be able to reset it)."""
    cache.delete(_key("user", _normalise(username)))


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
