"""The HTTP destination's outcomes (DESIGN.md section 6), against a real server."""
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from onceonly import NotSent, OutcomeUnknown, PermanentFailure
from onceonly.effect import EffectCtx
from onceonly.http import HttpDestination


@pytest.fixture
def server():
    answers = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body = answers["post"]
            answers["seen_key"] = self.headers.get("Idempotency-Key")
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", answers
    srv.shutdown()
    srv.server_close()


def ctx():
    return EffectCtx("mail", "k", "mail:k", 1, 1, {"a": 1})


@pytest.mark.parametrize("status, body, outcome", [
    (201, {"id": "item-1"}, None),
    (200, {}, PermanentFailure),        # 2xx without an id breaks the protocol
    (200, {"id": ""}, PermanentFailure),  # an empty id is no id (as the Rust destination)
    (200, {"id": True}, PermanentFailure),  # an id is a string or a number
    (200, {"id": {"n": 1}}, PermanentFailure),
    (422, {"error": "bad"}, PermanentFailure),
    (409, None, OutcomeUnknown),
    (429, None, OutcomeUnknown),
    (503, None, OutcomeUnknown),
    (600, None, PermanentFailure),      # outside the protocol: not a 5xx
])
def test_send_classifies_the_answer(server, status, body, outcome):
    url, answers = server
    answers["post"] = (status, body)
    dest = HttpDestination(url)
    if outcome is None:
        sent = dest.send(ctx())
        assert sent.external_ref == "item-1" and answers["seen_key"] == "mail:k"
    else:
        with pytest.raises(outcome):
            dest.send(ctx())


def test_a_refused_connection_is_not_sent():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(NotSent, match="connect failed"):
        HttpDestination(f"http://127.0.0.1:{port}").send(ctx())
