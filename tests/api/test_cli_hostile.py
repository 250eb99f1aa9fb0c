"""``vc`` against answers the portal would not give: a stand-in HTTP server (the standard
library's, on real sockets) answers what a hostile agent, a proxy or another service could.
Whatever comes back, ``vc`` prints nothing a terminal obeys, sends its token nowhere but the
configured portal, and ends with a message and its documented exit code, never a
traceback."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import vc_cli.main as cli
from vc_cli import http, output

TOKEN = "vcp_secret-token"
# What a terminal obeys: C0 but tab and newline, DEL, C1, bidi embeddings/overrides/isolates.
OBEYED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[H\x9b31m\u202egnp.exe\u202c\r\x08ok"


class Stub:
    """An HTTP server answering ``routes[(method, path)] = (status, headers, body)``; it
    records each request's method, path and Authorization header in ``seen``."""

    def __init__(self, host="127.0.0.1"):
        self.routes, self.seen = {}, []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                path = self.path.split("?")[0]
                stub.seen.append((self.command, path, self.headers.get("Authorization")))
                status, headers, body = stub.routes.get((self.command, path), (404, {}, b""))
                if status is None:  # not HTTP at all
                    self.wfile.write(body)
                    return
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = do_PATCH = answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def json(self, method, path, data, status=200, kind="application/json"):
        body = json.dumps(data).encode()
        self.routes[(method, "/api/v1" + path)] = (status, {"Content-Type": kind}, body)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    server = Stub()
    yield server
    server.close()


@pytest.fixture
def vc(stub, monkeypatch, capsys):
    """``vc(...)`` against the stub: (exit code, stdout, stderr); an exception fails here."""
    for name in ("VC_URL", "VC_TOKEN", "VC_LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VC_CONFIG", "/nonexistent")

    def run(*argv, url=None):
        code = cli.main(["--url", url or stub.url, "--token", TOKEN, *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def page(*items):
    return {"items": list(items), "next_page_token": None}


# ---------------------------------------------------------------------------------------------
# Terminal controls


def test_strings_from_the_portal_cannot_drive_the_terminal(stub, vc):
    """A member's agent chose the reasons and the name: no title, no clear screen, no
    reordering reaches the terminal, in the table, on stderr or in JSON."""
    op = {"id": 7, "kind": "validate", "done": True, "items": [], "error": None}
    verdict = {
        "vm_id": 1,
        "vm_name": f"node{HOSTILE}",
        "verdict": "BAD",
        "verdict_label": "불량",
        "reasons": [f"GPU 5 {HOSTILE}"],
    }
    run = {"operation_id": 7, "verdicts": [verdict], "seconds": 3}
    stub.json("POST", "/virtual-clusters/1:validate", op, status=202)
    stub.json("GET", "/virtual-clusters/1/validations", page(run))
    code, out, err = vc("cluster", "validate", "1", "--wait")
    assert code == http.EXIT_REFUSED
    assert OBEYED.findall(out + err) == []
    assert "GPU 5 ]0;owned" not in out and "gnp.exe" in out and "ok" in out
    assert err.startswith("vc: node") and "owned" not in err  # the window title is gone

    cluster = {"id": 1, "name": f"c{HOSTILE}", "status": "RUNNING"}
    stub.json("GET", "/virtual-clusters", page(cluster))
    stub.routes[("GET", "/api/v1/virtual-clusters/1/hostfile")] = (200, {}, HOSTILE.encode())
    for argv in (("cluster", "list"), ("cluster", "hostfile", "1")):
        code, out, err = vc(*argv)
        assert code == 0, err
        assert OBEYED.findall(out) == [] and "ok" in out

    code, out, _err = vc("cluster", "list", "-o", "json")
    assert code == 0 and OBEYED.findall(out) == []
    assert json.loads(out) == [cluster]  # JSON keeps every character, escaped

    problem = {"detail": f"refused {HOSTILE}", "status": 409}
    stub.json("POST", "/virtual-clusters/1:start", problem, 409, "application/problem+json")
    code, _out, err = vc("cluster", "start", "1")
    assert code == http.EXIT_REFUSED and OBEYED.findall(err) == [] and "refused" in err


def test_clean_keeps_text_and_drops_sequences():
    assert output.clean("a\tb\nc") == "a\tb\nc"
    assert output.clean("\x1b[1;31m빨강\x1b[0m") == "빨강"
    assert output.clean("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\") == "link"
    assert output.clean("\x1b]0;unterminated title") == "0;unterminated title"
    assert output.clean("abc\u202edcba\u2066x\u2069") == "abcdcbax"


# ---------------------------------------------------------------------------------------------
# The token stays with the portal


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_the_token_never_follows_a_redirect(stub, vc, status):
    elsewhere = Stub(host="127.0.0.2")
    try:
        location = f"{elsewhere.url}/api/v1/virtual-clusters"
        stub.routes[("GET", "/api/v1/virtual-clusters")] = (status, {"Location": location}, b"")
        elsewhere.json("GET", "/virtual-clusters", page())
        code, out, err = vc("cluster", "list")
    finally:
        elsewhere.close()
    assert elsewhere.seen == []  # not even asked, let alone with the token
    assert code == http.EXIT_SERVER and out == ""
    assert location in err and "VC_URL" in err


# ---------------------------------------------------------------------------------------------
# Every failure has its exit code


ANSWERS = {
    "html_200": (200, "text/html", b"<html><body>Sign in</body></html>", http.EXIT_SERVER),
    "problem_is_a_list": (400, "application/problem+json", b'["no"]', http.EXIT_REFUSED),
    "problem_is_a_string": (500, "application/problem+json", b'"oops"', http.EXIT_SERVER),
    "problem_is_null": (404, "application/problem+json", b"null", http.EXIT_NOT_FOUND),
    "detail_is_a_number": (403, "application/problem+json", b'{"detail": 5}', http.EXIT_AUTH),
    "list_without_items": (200, "application/json", b"[1, 2]", http.EXIT_SERVER),
    "items_not_objects": (200, "application/json", b'{"items": [1]}', http.EXIT_SERVER),
    "not_utf8": (200, "application/json", b"\xff\xfe", http.EXIT_SERVER),
    "nested_too_deep": (200, "application/json", b"[" * 100_000, http.EXIT_SERVER),
    "problem_nested_too_deep": (409, "application/problem+json", b"[" * 100_000, http.EXIT_REFUSED),
}


@pytest.mark.parametrize("answer", ANSWERS)
def test_an_answer_of_another_shape_is_its_exit_code(stub, vc, answer):
    status, kind, body, expected = ANSWERS[answer]
    stub.routes[("GET", "/api/v1/virtual-clusters")] = (status, {"Content-Type": kind}, body)
    code, _out, err = vc("cluster", "list")
    assert code == expected, err
    assert err.startswith("vc: ") and "Traceback" not in err


class ThenLastPage(dict):
    """Routes whose list answers its looping page ``times`` times, then a last page (so a
    client that never stops still ends, and the test fails instead of hanging)."""

    def __init__(self, routes, key, times):
        super().__init__(routes)
        self.key, self.left = key, times

    def get(self, key, default=None):
        if key == self.key:
            self.left -= 1
            if self.left < 0:
                return (200, {"Content-Type": "application/json"}, json.dumps(page()).encode())
        return super().get(key, default)


def test_a_list_whose_pages_never_end_is_exit_5(stub, vc):
    """A server that answers the same next page again and again: vc stops at the repeat
    instead of asking for ever."""
    looping = {"items": [{"id": 1, "name": "c", "status": "RUNNING"}], "next_page_token": "t"}
    stub.json("GET", "/virtual-clusters", looping)
    stub.routes = ThenLastPage(stub.routes, ("GET", "/api/v1/virtual-clusters"), 20)
    code, out, err = vc("cluster", "list")
    assert code == http.EXIT_SERVER and err.startswith("vc: ") and out == ""
    assert len(stub.seen) == 2


def test_an_answer_that_is_not_http_is_exit_5(stub, vc):
    stub.routes[("GET", "/api/v1/virtual-clusters")] = (None, {}, b"SSH-2.0-OpenSSH\r\n\r\n")
    code, _out, err = vc("cluster", "list")
    assert code == http.EXIT_SERVER and err.startswith("vc: ")


@pytest.mark.parametrize(
    "argv",
    [
        ("op", "get", "abc"),
        ("op", "wait", "1.5"),
        ("--url", "portal:8000", "cluster", "list"),
        ("--url", "ftp://portal", "cluster", "list"),
    ],
)
def test_bad_arguments_are_usage_errors(vc, argv):
    code, _out, err = vc(*argv)
    assert code == http.EXIT_USAGE and "Traceback" not in err


@pytest.mark.parametrize(
    "content",
    [b"[1]", b'{"url": 5}', b'{"token": ["x"]}', b"{not json", b"\xff", b'"s"', b"[" * 100_000],
    ids=["list", "url_number", "token_list", "not_json", "not_utf8", "string", "nested_too_deep"],
)
def test_a_malformed_config_file_is_a_usage_error(tmp_path, monkeypatch, capsys, content):
    config = tmp_path / "config.json"
    config.write_bytes(content)
    config.chmod(0o600)
    monkeypatch.setenv("VC_CONFIG", str(config))
    assert cli.main(["cluster", "list"]) == http.EXIT_USAGE
    assert str(config) in capsys.readouterr().err


def test_a_config_file_others_can_read_gets_a_warning(stub, tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"url": stub.url, "token": TOKEN}))
    monkeypatch.delenv("VC_URL", raising=False)
    monkeypatch.delenv("VC_TOKEN", raising=False)
    monkeypatch.setenv("VC_CONFIG", str(config))
    stub.json("GET", "/virtual-clusters", page())
    config.chmod(0o644)
    assert cli.main(["cluster", "list"]) == 0  # a warning, as ssh gives, not a refusal
    err = capsys.readouterr().err
    assert "0644" in err and f"chmod 600 {config}" in err
    config.chmod(0o600)
    assert cli.main(["cluster", "list"]) == 0
    assert capsys.readouterr().err == ""


def test_vcs_own_messages_follow_the_language(stub, vc):
    stub.json("GET", "/virtual-clusters", page())
    code, _out, err = vc("cluster", "get", "nosuch")
    assert code == http.EXIT_NOT_FOUND and "찾을 수 없습니다" in err
    code, _out, err = vc("cluster", "get", "nosuch", "--lang", "en")
    assert code == http.EXIT_NOT_FOUND and "not found" in err


@pytest.mark.parametrize("ref", ["²", "١٢", "12a"])
def test_a_name_that_only_looks_like_a_number_is_looked_up(stub, vc, ref):
    stub.json("GET", "/virtual-clusters", page())
    code, _out, err = vc("cluster", "get", ref)
    assert code == http.EXIT_NOT_FOUND and ref in err
