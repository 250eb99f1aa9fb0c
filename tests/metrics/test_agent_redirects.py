"""The agent's token stays with the portal it was given: a portal URL that answers a redirect
to another host and port (real sockets, the standard library's server) is logged, never
followed, for the samples' POST, ``--check`` and the job runner's calls alike."""

import logging
import threading
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from metrics.vm_agent import collect
from metrics.vm_agent import jobs as agent_jobs
from metrics.vm_agent import main as agent

TOKEN = "vcm_stays-at-home"
REDIRECTS = [301, 302, 303, 307, 308]


class Stub:
    """An HTTP server answering every request with ``answer = (status, headers, body)``; it
    records each request's method, path and Authorization header in ``seen``."""

    def __init__(self, host, answer):
        self.answer, self.seen = answer, []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def reply(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                stub.seen.append((self.command, self.path, self.headers.get("Authorization")))
                status, headers, body = stub.answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_HEAD = reply

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers(request):
    """(portal, elsewhere): the portal redirects everything to the same path on another
    host and port, which would accept anything (``{"jobs": [], "vm": 1}``)."""
    status = request.param
    accepted = (200, {"Content-Type": "application/json"}, b'{"jobs": [], "vm": 1}')
    elsewhere = Stub("127.0.0.2", accepted)
    portal = Stub("127.0.0.1", (status, {"Location": f"{elsewhere.url}/api/metrics/ingest"}, b""))
    yield portal, elsewhere
    portal.close()
    elsewhere.close()


def redirect_logged(caplog, elsewhere):
    return [
        r
        for r in caplog.records
        if r.name == "metrics.agent"
        and elsewhere.url in r.getMessage()
        and "not followed" in r.getMessage()
    ]


@pytest.mark.parametrize("servers", REDIRECTS, indirect=True)
def test_the_samples_post_keeps_its_token_and_its_samples(servers, caplog, tmp_path):
    portal, elsewhere = servers
    caplog.set_level(logging.INFO, logger="metrics.agent")
    url = f"{portal.url}/api/metrics/ingest"
    a = agent.Agent(url, TOKEN, timeout=5, collector=collect.Collector(tmp_path))
    a.tick()
    assert elsewhere.seen == []  # not even asked, let alone with the token
    assert portal.seen == [("POST", "/api/metrics/ingest", f"Bearer {TOKEN}")]
    assert len(a.buffer) == 1 and a.stored == 0 and a.failures == 1  # kept for a retry
    assert len(redirect_logged(caplog, elsewhere)) == 1


@pytest.mark.parametrize("servers", REDIRECTS, indirect=True)
def test_check_reports_the_redirect_and_sends_nothing_elsewhere(servers, caplog, capsys):
    portal, elsewhere = servers
    caplog.set_level(logging.INFO, logger="metrics.agent")
    url = f"{portal.url}/api/metrics/ingest"
    assert agent.main(["--url", url, "--token", TOKEN, "--check"]) == 1
    assert capsys.readouterr().out.startswith("failed: ")
    assert elsewhere.seen == [] and [p for _m, p, _a in portal.seen] == ["/api/metrics/check"]
    assert len(redirect_logged(caplog, elsewhere)) == 1


@pytest.mark.parametrize("servers", REDIRECTS, indirect=True)
def test_the_job_runner_keeps_its_token(servers, caplog):
    portal, elsewhere = servers
    caplog.set_level(logging.INFO, logger="metrics.agent")
    runner = agent_jobs.JobRunner(f"{portal.url}/api/metrics/ingest", TOKEN, http_timeout=5)
    with pytest.raises(urllib.error.HTTPError):  # the poll loop logs it and polls again
        runner.poll_once()
    job = {"id": 7, "kind": "ib_server", "params": {"ports": 0}, "timeout": 30}  # runs nothing
    runner.run_and_post(job)  # a refused result is not posted again
    assert elsewhere.seen == []
    assert [p for _m, p, _a in portal.seen] == [
        "/api/metrics/jobs/next",
        "/api/metrics/jobs/result",
    ]
    assert len(redirect_logged(caplog, elsewhere)) == 2
