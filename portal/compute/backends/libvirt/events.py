"""libvirt's lifecycle events: a guest that stops on its own (shut down from inside, crashed,
destroyed outside the portal) is known within seconds, not at the reconciler's next pass.

``Watcher`` keeps one connection per GPU host with a lifecycle callback, and hands each stop
of one of this portal's domains to a handler in the thread that calls ``drain``, never in
libvirt's event loop thread (``start_event_loop``): the handler writes to the database and
calls libvirt, which may take seconds, and the loop must go on serving every connection's
keepalive meanwhile. A host whose connection closes (libvirtd restarted, the host gone) is
connected again at the next ``watch``; what stopped meanwhile is the reconciler's to see.
"""

import logging
import queue
import threading
from dataclasses import dataclass
from datetime import datetime

import libvirt
from django.utils import timezone

from portal.compute.backends.libvirt import names
from portal.compute.backends.libvirt.connection import alive, open_checked
from portal.foundation.errors import BackendError

log = logging.getLogger(__name__)

# Why a domain stopped, by the STOPPED event's detail, in the reconciler's words. A domain
# saved, migrated away or reverted to a snapshot did not stop: those are not reported.
STOP_REASONS = {
    libvirt.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN: "guest_shutdown",
    libvirt.VIR_DOMAIN_EVENT_STOPPED_DESTROYED: "domain_destroyed",
    libvirt.VIR_DOMAIN_EVENT_STOPPED_CRASHED: "guest_crashed",
    libvirt.VIR_DOMAIN_EVENT_STOPPED_FAILED: "domain_stopped",
}

_loop_lock = threading.Lock()
_loop: threading.Thread | None = None


def start_event_loop() -> None:
    """libvirt's default event loop, in a daemon thread, once per process. Connections
    deliver events only if they are opened after it is registered."""
    global _loop
    with _loop_lock:
        if _loop is not None:
            return
        libvirt.virEventRegisterDefaultImpl()
        _loop = threading.Thread(target=_run_loop, name="libvirt-events", daemon=True)
        _loop.start()


def _run_loop() -> None:
    while True:
        libvirt.virEventRunDefaultImpl()


@dataclass(frozen=True)
class Stop:
    vm_id: int
    reason: str
    seen_at: datetime  # when the event arrived: a VM started after it is not stopped by it


class Watcher:
    def __init__(self) -> None:
        self.stops: queue.Queue[Stop] = queue.Queue()
        self._connections: dict[str, libvirt.virConnect] = {}

    def watch(self, hosts) -> list[str]:
        """Listen to every host of ``hosts`` not listened to yet, or whose connection died;
        returns the URIs it could not reach (listened to again at the next call)."""
        start_event_loop()
        failed = []
        for uri in dict.fromkeys(host.uri for host in hosts):
            conn = self._connections.get(uri)
            if conn is not None and alive(conn):
                continue
            self._connections.pop(uri, None)
            try:
                self._connections[uri] = self._listen(uri)
            except (BackendError, libvirt.libvirtError) as exc:
                log.warning("lifecycle events of %s: %r", uri, exc)
                failed.append(uri)
        return failed

    def _listen(self, uri: str) -> libvirt.virConnect:
        conn = open_checked(uri)  # the URI checked as before every other open
        conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._lifecycle, None
        )
        return conn

    def _lifecycle(self, _conn, dom, event, detail, _opaque) -> None:
        """In libvirt's event loop thread: note the stop, nothing more."""
        if event == libvirt.VIR_DOMAIN_EVENT_STOPPED:
            reason = STOP_REASONS.get(detail)
        elif event == libvirt.VIR_DOMAIN_EVENT_CRASHED:
            reason = "guest_crashed"
        else:
            return
        vm_id = names.owned_domain(dom)
        if reason is not None and vm_id is not None:
            self.stops.put(Stop(vm_id, reason, timezone.now()))

    def drain(self, handle, timeout: float) -> int:
        """``handle(stop)`` for each stop noted, waiting up to ``timeout`` seconds for the
        first; returns how many were handled."""
        handled = 0
        try:
            stop = self.stops.get(timeout=timeout)
            while True:
                handle(stop)
                handled += 1
                stop = self.stops.get_nowait()
        except queue.Empty:
            return handled

    def close(self) -> None:
        for conn in self._connections.values():
            try:
                conn.close()
            except libvirt.libvirtError:
                pass
        self._connections.clear()
