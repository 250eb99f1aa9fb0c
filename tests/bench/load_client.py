"""The load test's browsers: keep-alive HTTP connections with cookies and a CSRF token."""

import re
import statistics
import time
from http.client import HTTPConnection

EXPECTED = {200, 302}


def percentiles(values):
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {50: cuts[49], 95: cuts[94], 99: cuts[98]}


def busy(times):
    """CPU seconds the whole machine spent not idle."""
    return times.user + times.nice + times.system + times.irq + times.softirq + times.steal


def cookie_jar(response):
    jar = {}
    for header, value in response.getheaders():
        if header.lower() == "set-cookie":
            name, _sep, rest = value.partition("=")
            jar[name.strip()] = rest.split(";", 1)[0]
    return jar


class UserClient:
    """One browser: a keep-alive connection, its cookies, its CSRF token."""

    def __init__(self, port, session_key):
        self.port = port
        self.cookies = {"__Host-sessionid": session_key}
        self.csrf_token = ""
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()

    def request(self, method, path, headers=None):
        """(status or exception name, seconds, body)."""
        headers = {
            **(headers or {}),
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
        }
        if method == "POST":
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        started = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, b"" if method == "POST" else None, headers)
            response = self.conn.getresponse()
            body = response.read()
        except (OSError, ValueError) as exc:  # http.client errors are OSError/ValueError kinds
            self.close()
            self.conn = None
            return type(exc).__name__, time.perf_counter() - started, str(exc).encode()
        seconds = time.perf_counter() - started
        self.cookies.update(cookie_jar(response))
        if response.getheader("Connection", "").lower() == "close":
            self.close()
            self.conn = None
        token = re.search(rb'"X-CSRFToken": "([^"]+)"', body)
        if token:
            self.csrf_token = token.group(1).decode()
        return response.status, seconds, body

    def get(self, path):
        return self.request("GET", path)

    def timed(self, kind, method, path, headers=None):
        status, seconds, body = self.request(method, path, headers)
        detail = "" if status in EXPECTED else f"{method} {path} {body[:300]!r}"
        return kind, status, seconds, detail
