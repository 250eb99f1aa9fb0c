"""The one harness for tests that race real requests against each other.

Each call runs on its own thread with its own PostgreSQL connection and transaction; a
barrier releases them together, so they meet inside the locks rather than one after the
other. A race is decided by the state it leaves, never by how long a call took.
"""

import threading

from django.db import connection

from portal.foundation import errors


def race(*calls, timeout: float = 60):
    """Run ``calls`` at once; return each one's result, or the typed refusal it raised.

    Anything else a call raises is re-raised here (a racer's bug fails the test, it is not
    a refusal), and a call still running after ``timeout`` fails it too.
    """
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)
    crashes: list[BaseException] = []

    def run(i, fn):
        try:
            barrier.wait(timeout)
            results[i] = fn()
        except errors.RuleViolation as refusal:
            results[i] = refusal
        except BaseException as exc:  # handed to the test's thread below
            crashes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    stuck = [i for i, thread in enumerate(threads) if thread.is_alive()]
    assert not stuck, f"calls {stuck} still running after {timeout}s (a lock never released?)"
    if crashes:
        raise crashes[0]
    return results


def outcome(result) -> str:
    """``"won"`` for a call that returned, else the code of the refusal it raised."""
    return result.code if isinstance(result, errors.RuleViolation) else "won"
