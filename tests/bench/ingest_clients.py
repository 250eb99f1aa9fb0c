"""bench_metrics' clients: keep-alive POSTs of agent batches from threads, for a set time."""

import threading
import time
from http.client import HTTPConnection

import psycopg
from django.core.management.base import CommandError


def hammer(address, clients, make_request, seconds):
    """Run ``make_request(client_index, n) -> (path, body, token) or None`` on keep-alive
    connections from ``clients`` threads for ``seconds``; returns (requests, elapsed)."""
    counts, errors = [0] * clients, []
    stop = time.monotonic() + seconds

    def client(index):
        conn = HTTPConnection(*address, timeout=30)
        n = 0
        while time.monotonic() < stop:
            request = make_request(index, n)
            if request is None:  # this client's prepared batches are used up
                break
            path, body, token = request
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            if body[:2] == b"\x1f\x8b":  # gzip magic: compressed as the agent does
                headers["Content-Encoding"] = "gzip"
            conn.request("POST", path, body, headers)
            response = conn.getresponse()
            payload = response.read()
            if response.status != 200:
                errors.append((response.status, payload[:200]))
                break
            n += 1
        counts[index] = n
        conn.close()

    return in_threads(client, counts, errors)


def in_threads(target, counts, errors=None):
    """Run ``target(index)`` in one thread per entry of ``counts``; an exception in any
    fails the bench (rather than counting as zero work)."""
    errors = [] if errors is None else errors

    def guarded(index):
        try:
            target(index)
        except (OSError, psycopg.Error) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(len(counts))]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    if errors:
        raise CommandError(f"errors during the bench: {errors[:3]}")
    return sum(counts), elapsed
