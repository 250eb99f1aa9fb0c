"""One libvirt connection per host URI per process, reopened when it dies.

The test driver (``test:///<file>``) keeps its state per connection, which this cache also
makes the state of the process: tests and the backend see the same hosts.

Worker threads share the cache: a URI is looked up, opened and stored under its own lock, so
two threads never open two connections to one host, and a host that is slow to answer holds
back only the threads that want it. A connection leaves the cache when libvirt reports it
closed (its close callback) or, on a driver that reports nothing (the test driver), when it
is found dead at the next lookup (``isAlive``: its state, never an error's code).

A URI is checked (``uri_refusal``) right before it is opened, whoever stored it: one the rule
refuses (saved before the rule, or written around the admin's form) is never opened.
"""

import logging
import threading
import time
from urllib.parse import urlsplit

import libvirt
from django.conf import settings

from portal.compute.models.hosts import uri_refusal
from portal.foundation.errors import BackendError
from portal.foundation.errors.hosts import HostUriRefused

log = logging.getLogger(__name__)
_guard = threading.Lock()  # the cache's dicts and list; never held across a libvirt call
_connections: dict[str, libvirt.virConnect] = {}
_opening: dict[str, threading.Lock] = {}  # uri -> held while it is looked up, opened, stored
_retired: list[libvirt.virConnect] = []  # reported closed: closed at the next connect()
_failed: dict[str, float] = {}  # uri -> when opening it last failed
# A remote host that could not be reached is not tried again for this long by this process:
# an SSH or TLS connect to a dead host can take minutes, and the reconciler visits every host.
RETRY_SECONDS = 30.0


def _quiet(_ctx, _err):
    """libvirt prints every error to stderr by default; callers handle them."""


libvirt.registerErrorHandler(_quiet, None)


def connect(host) -> "libvirt.virConnect":
    conn = _connections.get(host.uri)
    if conn is not None and alive(conn):
        return conn
    _close_retired()
    with _lock_for(host.uri):
        conn = _connections.get(host.uri)  # another thread may have opened it meanwhile
        if conn is not None:
            if alive(conn):
                return conn
            _drop(host.uri, conn)
            _close(conn)
        conn = _open(host)
        with _guard:
            _connections[host.uri] = conn
        return conn


def _open(host) -> "libvirt.virConnect":
    failed = _failed.get(host.uri)
    if failed is not None and time.monotonic() - failed < RETRY_SECONDS:
        raise BackendError()
    try:
        conn = open_checked(host.uri, getattr(host, "name", "?"))
    except HostUriRefused:
        raise
    except BackendError:
        if urlsplit(host.uri).netloc:  # a remote host; a local socket fails fast anyway
            _failed[host.uri] = time.monotonic()
        raise
    _failed.pop(host.uri, None)
    try:
        conn.registerCloseCallback(_closed, host.uri)
    except libvirt.libvirtError:
        pass  # a driver without it: the lookup's isAlive finds the connection dead
    return conn


def open_checked(uri: str, name: str = "?") -> "libvirt.virConnect":
    """A new connection to ``uri`` once ``uri_refusal`` allows it, with keepalive on a
    remote driver; ``HostUriRefused`` or ``BackendError`` otherwise (not cached: ``connect``
    caches, the lifecycle-event watcher keeps its own)."""
    refusal = uri_refusal(uri)
    if refusal is not None:
        # What was wrong goes to the log; the error raised names nothing of the URI (a VM's
        # error may show it to the VM's project).
        log.error(
            "host %s: libvirt URI %r refused, not opened (%s %s)",
            name,
            uri,
            refusal.code,
            refusal.params,
        )
        raise HostUriRefused()
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError as exc:
        log.warning("libvirt %s: %s", uri, exc)
        raise BackendError() from exc
    if not uri.startswith("test:"):
        try:  # notice a dead peer within ~20 s instead of the TCP timeout
            conn.setKeepAlive(5, 3)
        except libvirt.libvirtError:
            pass
    return conn


def _closed(conn, _reason, uri) -> None:
    """libvirt's close callback (on the thread whose call, or keepalive, noticed): the
    connection leaves the cache at once; it is closed later, outside libvirt's callback."""
    with _guard:
        if _connections.get(uri) is conn:
            del _connections[uri]
            _retired.append(conn)


def _lock_for(uri) -> threading.Lock:
    with _guard:
        return _opening.setdefault(uri, threading.Lock())


def alive(conn) -> bool:
    try:
        return bool(conn.isAlive())
    except libvirt.libvirtError:  # closed already
        return False


def _drop(uri, conn) -> None:
    with _guard:
        if _connections.get(uri) is conn:
            del _connections[uri]


def _close(conn) -> None:
    for call in (conn.unregisterCloseCallback, conn.close):
        try:
            call()
        except libvirt.libvirtError:
            pass


def _close_retired() -> None:
    with _guard:
        retired = _retired[:]
        _retired.clear()
    for conn in retired:
        _close(conn)


def forget(uri) -> None:
    """Drop a cached connection (tests that rebuild a test driver's host file)."""
    _failed.pop(uri, None)
    with _guard:
        conn = _connections.pop(uri, None)
    if conn is not None:
        _close(conn)


def domain_type(host) -> str:
    if host.uri.startswith("test:"):
        return "test"  # the test driver accepts only its own type
    return host.domain_type or settings.LIBVIRT_DOMAIN_TYPE


def lookup(call, *args):
    """``call(*args)``, or None when libvirt says there is no such object (any error:
    the test driver and QEMU differ in codes, so callers check state, not codes)."""
    try:
        return call(*args)
    except libvirt.libvirtError:
        return None
