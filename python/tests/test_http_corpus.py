"""protocol/corpus/http_answers.json, the rule every client shares: each answer
and each transport fault reproduced on a real socket and sent with
HttpDestination.send, whose outcome must be the case's class."""
import json
import pathlib
import socket
import struct
import threading
import time

import pytest

from onceonly import NotSent, OutcomeUnknown, PermanentFailure
from onceonly.effect import EffectCtx
from onceonly.http import HttpDestination

CORPUS = json.loads((pathlib.Path(__file__).resolve().parents[2] / "protocol/corpus/http_answers.json").read_text())
CLASS_OF = {NotSent: "not_sent", OutcomeUnknown: "unknown", PermanentFailure: "permanent"}


class RawHTTP:
    """Answers a send exactly as told, byte for byte, or fails the connection
    after reading the whole request; ``requests`` counts requests read in full."""

    def __init__(self, mode, status=200, headers=None, body=""):
        self.mode, self.status, self.headers, self.body = mode, status, headers or {}, body
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.requests, self.held = 0, []
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self):
        for s in self.held + [self.sock]:
            s.close()

    def _serve(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "tls_handshake":
                client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")  # not TLS
                client.close()
                continue
            self._read_request(client)
            self.requests += 1
            if self.mode == "answer":
                self._answer(client)
            elif self.mode == "reset_after_write":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
                client.close()
            elif self.mode == "closed_after_write":
                client.close()
            else:  # read_timeout: never answers
                self.held.append(client)

    @staticmethod
    def _read_request(client):
        data = b""
        while b"\r\n\r\n" not in data:
            data += client.recv(4096)
        head, rest = data.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += client.recv(4096)

    def _answer(self, client):
        body = self.body.encode()
        lines = [f"HTTP/1.1 {self.status} Whatever"] + [f"{k}: {v}" for k, v in self.headers.items()]
        if self.status != 204:
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: close")
        client.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if self.status == 204 else body))
        client.close()


def send(url, timeout=5.0):
    """The class of one send, and the external reference when done."""
    ctx = EffectCtx("mail", "k-1", "mail:k-1", 1, 1, {"a": 1})
    try:
        sent = HttpDestination(url, timeout=timeout).send(ctx)
    except (NotSent, OutcomeUnknown, PermanentFailure) as e:
        return CLASS_OF[type(e)], None
    return "done", sent.external_ref


@pytest.mark.parametrize("case", CORPUS["send"], ids=[c["name"] for c in CORPUS["send"]])
def test_answer_class(case):
    server = RawHTTP("answer", case["status"], case["headers"], case["body"])
    try:
        assert send(f"http://127.0.0.1:{server.port}") == (case["class"], case.get("external_ref"))
    finally:
        server.close()


def fault(kind):
    if kind == "connect_refused":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return send(f"http://127.0.0.1:{port}"), 0
    if kind == "connect_timeout":
        # A listening socket nobody accepts on, its queue (backlog 0) filled:
        # a further connect gets no answer to its SYN and times out.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for f in fillers:
                f.setblocking(False)
                f.connect_ex(("127.0.0.1", port))
            time.sleep(0.2)  # the fillers' handshakes complete and fill the queue
            return send(f"http://127.0.0.1:{port}", timeout=0.5), 0
        finally:
            for s in fillers + [listener]:
                s.close()
    if kind == "dns_failure":
        return send("http://onceonly-corpus.invalid"), 0
    server = RawHTTP(kind)
    try:
        scheme = "https" if kind == "tls_handshake" else "http"
        got = send(f"{scheme}://127.0.0.1:{server.port}", timeout=0.5 if kind == "read_timeout" else 5.0)
        return got, server.requests
    finally:
        server.close()


@pytest.mark.parametrize("case", CORPUS["transport"], ids=[c["error"] for c in CORPUS["transport"]])
def test_transport_fault_class(case):
    (cls, ref), written = fault(case["error"])
    assert (cls, ref) == (case["class"], None)
    # The case's premise holds: the request was read in full exactly when the class says "after".
    assert written == (1 if case["class"] == "unknown" else 0)


def test_the_corpus_covers_every_class():
    assert {c["class"] for c in CORPUS["send"]} == {"done", "unknown", "permanent"}
    assert {c["class"] for c in CORPUS["transport"]} == {"not_sent", "unknown"}
