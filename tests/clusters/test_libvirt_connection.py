"""The process's libvirt connections (test driver): one per host URI whatever the threads,
and a connection libvirt reports closed, or one found dead, is replaced by a new one."""

import threading
from types import SimpleNamespace

import libvirt
import pytest

from portal.compute.backends.libvirt import connection
from tests.races import race


@pytest.fixture
def host(tmp_path):
    host = SimpleNamespace(name="h0", uri=f"test://{tmp_path}/h0.xml")
    (tmp_path / "h0.xml").write_text("<node/>")
    yield host
    connection.forget(host.uri)


@pytest.fixture
def opens(monkeypatch):
    """``libvirt.open`` counted; the first caller stays inside it until a second thread has
    either come to the URI's lock (it waits its turn) or come into ``libvirt.open`` too (two
    connections: what the lock is there to prevent). Decided by state, not by time."""
    state = SimpleNamespace(opened=[], at_lock=0)
    changed = threading.Condition()
    real_open, real_lock_for = libvirt.open, connection._lock_for

    class Watched:
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            with changed:
                state.at_lock += 1
                changed.notify_all()
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    def open_(uri):
        with changed:
            state.opened.append(uri)
            changed.notify_all()
            if len(state.opened) == 1:
                met = changed.wait_for(lambda: state.at_lock >= 2 or len(state.opened) >= 2, 60)
                assert met, "the second thread never came to connect()"
        return real_open(uri)

    monkeypatch.setattr(connection.libvirt, "open", open_)
    monkeypatch.setattr(connection, "_lock_for", lambda uri: Watched(real_lock_for(uri)))
    return state


def test_two_threads_racing_to_one_host_share_one_connection(host, opens):
    first, second = race(lambda: connection.connect(host), lambda: connection.connect(host))
    assert first is second and first.isAlive()
    assert opens.opened == [host.uri]


def test_a_connection_found_closed_is_replaced(host):
    conn = connection.connect(host)
    assert connection.connect(host) is conn
    conn.close()  # behind the cache's back: the test driver reports nothing
    fresh = connection.connect(host)
    assert fresh is not conn and fresh.isAlive()
    assert connection.connect(host) is fresh


def test_a_connection_libvirt_reports_closed_leaves_the_cache(host, monkeypatch):
    """What connect() registers as the close callback, called as libvirt calls it (the test
    driver never does): the cache drops the connection, the next connect() opens another and
    closes the old one."""
    registered = []
    real = libvirt.virConnect.registerCloseCallback

    def register(conn, cb, opaque):
        registered.append((conn, cb, opaque))
        return real(conn, cb, opaque)

    monkeypatch.setattr(libvirt.virConnect, "registerCloseCallback", register)
    conn = connection.connect(host)
    ((registered_on, callback, opaque),) = registered
    assert registered_on is conn and conn.isAlive()
    callback(conn, libvirt.VIR_CONNECT_CLOSE_REASON_EOF, opaque)
    fresh = connection.connect(host)
    assert fresh is not conn and fresh.isAlive()
    with pytest.raises(libvirt.libvirtError):
        conn.isAlive()  # the reported one was closed, outside the callback
    callback(conn, libvirt.VIR_CONNECT_CLOSE_REASON_EOF, opaque)  # late: changes nothing
    assert connection.connect(host) is fresh
