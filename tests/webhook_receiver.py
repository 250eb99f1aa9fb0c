"""A real HTTP receiver of webhooks on 127.0.0.1 (a thread running ``http.server``): it
records every request as it came (headers and raw body) and answers with the status codes it
is told, or hangs until it is stopped. ``tests/conftest.py`` makes it the ``receiver``
fixture."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict
    body: bytes


@dataclass
class Receiver:
    url: str = ""
    requests: list = field(default_factory=list)
    answers: list = field(default_factory=list)  # status codes, in turn; then 200
    hanging: bool = False
    released: threading.Event = field(default_factory=threading.Event)

    def bodies(self) -> list[bytes]:
        return [request.body for request in self.requests]


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append(Received(dict(self.headers.items()), body))
            if state.hanging:
                state.released.wait(30)  # no answer: the sender's read time-out ends it
                return
            self.send_response(state.answers.pop(0) if state.answers else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/vc?source=test"
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
