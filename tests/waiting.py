"""Waiting on a state: the suite's one poll loop. The timeout only ends a test that went
wrong; what a test decides on is the state it waits for, never the time it took."""

import time


def wait_until(predicate, timeout, interval=0.02, what="condition"):
    """Poll ``predicate`` until it answers something true and return that answer; fail
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
