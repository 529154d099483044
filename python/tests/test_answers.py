"""Answers from destinations: the shared rules (protocol/corpus/answers.json),
the HTTP destination reading at most max_answer_bytes (a 64 MiB declared
body, an endless chunked one), and the guard never storing an answer that
breaks the rules."""
import json
import socket
import threading

import pytest

from onceonly import Failed, Guard, OutcomeUnknown, Payload, PermanentFailure, Sent, State
from onceonly.answer import AnswerError, check_reference, check_result, escape_controls, is_control
from onceonly.effect import EffectCtx
from onceonly.http import HttpDestination
from conftest import REPO, spec

ANSWERS = json.loads((REPO / "protocol/corpus/answers.json").read_text("utf-8"))
BIG = 64 << 20


def test_answers_corpus_every_case(capsys):
    cases, escapes = ANSWERS["cases"], ANSWERS["escapes"]
    assert len(cases) >= 30, "the corpus lost its cases"
    for case in cases:
        text = case["text"] * case.get("repeat", 1)
        check = check_reference if case["part"] == "reference" else check_result
        try:
            check(text)
            rule = None
        except AnswerError as e:
            rule = e.rule
            assert not any(is_control(c) for c in str(e)), case["name"]
        assert rule == case["error"], case["name"]
    for case in escapes:
        assert escape_controls(case["text"]) == case["shown"], case["text"]
    with capsys.disabled():
        print(f"\nanswers corpus: {len(cases)} cases, {len(escapes)} escapes")


class RawServer:
    """Answers every request on a bare socket: `reply` is ("body", status,
    text), ("huge", status, length) or ("endless", status). Counts the body
    bytes it managed to write."""

    def __init__(self, reply):
        self.reply, self.written = reply, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            kind, status, *rest = self.reply
            try:
                if kind == "body":
                    body = rest[0].encode()
                    conn.sendall(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                                 % (status, len(body), body))
                elif kind == "huge":
                    conn.sendall(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n{\"id\":\"a1\",\"pad\":\""
                                 % (status, rest[0]))
                    block = b"x" * 65536
                    while self.written < rest[0]:
                        conn.sendall(block)
                        self.written += len(block)
                else:
                    conn.sendall(b"HTTP/1.1 %d X\r\ntransfer-encoding: chunked\r\n\r\n" % status)
                    block = b"10000\r\n" + b"x" * 65536 + b"\r\n"
                    while True:
                        conn.sendall(block)
                        self.written += 65536
            except OSError:
                return

    def close(self):
        self.sock.close()


def ctx():
    return EffectCtx("mail", "k", "mail:k", 1, 1, {"a": 1})


@pytest.mark.parametrize("reply, outcome, said", [
    (("huge", 200, BIG), OutcomeUnknown, "whether it is done is unknown"),
    (("endless", 201, 0), OutcomeUnknown, "whether it is done is unknown"),
    (("huge", 422, BIG), PermanentFailure, "answered 422"),
    (("endless", 503, 0), OutcomeUnknown, "answered 503"),
])
def test_a_long_answer_is_cut_at_the_limit(reply, outcome, said):
    server = RawServer(reply)
    try:
        with pytest.raises(outcome) as raised:
            HttpDestination(server.url, timeout=20).send(ctx())
        assert said in raised.value.reason
        assert "max_answer_bytes = 65536" in raised.value.reason
        assert server.written < BIG / 2, f"read {server.written} bytes of an answer cut at 64 KiB"
    finally:
        server.close()


def test_a_lookup_applies_the_limit_and_the_reference_rule():
    server = RawServer(("huge", 200, BIG))
    try:
        with pytest.raises(RuntimeError, match="max_answer_bytes"):
            HttpDestination(server.url).lookup(ctx())
    finally:
        server.close()
    server = RawServer(("body", 200, json.dumps({"id": "a1\u001b[2J\r\nFAKE"})))
    try:
        with pytest.raises(RuntimeError, match="control character U\\+001B"):
            HttpDestination(server.url).lookup(ctx())
        with pytest.raises(PermanentFailure, match="control character U\\+001B"):
            HttpDestination(server.url).send(ctx())
    finally:
        server.close()


def test_the_guard_never_stores_an_answer_that_breaks_the_rules(sqlite_store):
    g = Guard(sqlite_store, spec(effect="keyed"))
    for key, sent, said in [
        ("ref", Sent("r" * 2049), "2049 bytes, over the limit of 2048"),
        ("ctl", Sent("a\u202eb"), "control character U+202E"),
        ("res", Sent("ok", "x" * 70000), "result is 70002 bytes"),
    ]:
        out = g.run(key, Payload.none(), lambda c, sent=sent: sent)
        assert isinstance(out, Failed) and said in out.error, out
        record = sqlite_store.get("mail", key).record
        assert record.state is State.FAILED
        assert record.external_ref is None and record.result is None
