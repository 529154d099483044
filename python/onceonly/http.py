"""An HTTP destination as DESIGN.md section 6 describes it (the one the Rust
relay speaks): send, lookup and delete, each classified into done / not sent
/ unknown / permanent failure. Standard library only."""
from __future__ import annotations

import http.client
import json
import socket
from typing import Optional, Tuple
from urllib.parse import quote, urlsplit

from .answer import AnswerError, check_reference
from .canonical import canonical_json
from .effect import EffectCtx, NotSent, OutcomeUnknown, PermanentFailure, Sent
from .errors import InvalidInput


MAX_ANSWER_BYTES = 65536
"""The longest answer body read (as the Rust destination's default); a
longer one is cut and the rest never read."""


class HttpDestination:
    """``POST BASE/items`` with ``Idempotency-Key: T:K``; lookup by key; delete by id.

    Use its methods as a guard's effect: ``guard.run(key, payload,
    dest.send, lookup=dest.lookup, withdraw=dest.delete)``.
    """

    def __init__(self, base_url: str, timeout: float = 10.0, max_answer_bytes: int = MAX_ANSWER_BYTES):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f"{base_url!r} is not an http:// or https:// base URL")
        if max_answer_bytes < 1:
            raise InvalidInput(f"max_answer_bytes {max_answer_bytes}: give a size in bytes such as 65536")
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        self.max_answer_bytes = max_answer_bytes
        self._parts = parts

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        return cls(self._parts.hostname, self._parts.port, timeout=timeout)

    def _path(self, tail: str) -> str:
        return f"{self._parts.path.rstrip('/')}{tail}"

    def _timeout(self, ctx: Optional[EffectCtx]) -> float:
        left = ctx.remaining() if ctx is not None and ctx.deadline else self.timeout
        return max(min(self.timeout, left), 0.05)

    def send(self, ctx: EffectCtx) -> Sent:
        # The body is the payload's canonical JSON, as the Rust relay sends the stored one.
        body = canonical_json(ctx.payload).encode() if ctx.payload is not None else b""
        conn = self._connection(self._timeout(ctx))
        try:
            try:
                conn.connect()
            except OSError as e:  # nothing of the request was written
                raise NotSent(f"connect failed: {e}") from None
            try:
                conn.request("POST", self._path("/items"), body=body,
                             headers={"Idempotency-Key": ctx.idempotency_key, "Content-Type": "application/json"})
                resp = conn.getresponse()
                status = resp.status
                data, cut = self._read(resp)
            except (OSError, http.client.HTTPException) as e:
                raise OutcomeUnknown(f"after the request was written: {type(e).__name__}: {e}") from None
        finally:
            conn.close()
        note = self._cut_note(cut)
        if 200 <= status < 300:
            if cut:
                raise OutcomeUnknown(f"the destination answered {status} with an answer longer than max_answer_bytes "
                                     f"= {self.max_answer_bytes}: the id in it cannot be read, so whether it is "
                                     "done is unknown")
            ref = _id_of(data)
            if ref is None:
                raise PermanentFailure(f"the destination answered {status} without an id")
            try:
                check_reference(ref)
            except AnswerError as e:
                raise PermanentFailure(f"the destination answered {status}: {e}") from None
            return Sent(ref, {"id": ref})
        if status in (408, 409, 429) or 500 <= status <= 599:
            raise OutcomeUnknown(f"the destination answered {status}{note}")
        raise PermanentFailure(f"the destination answered {status}: {data[:200]!r}{note}")

    def _read(self, resp: http.client.HTTPResponse) -> Tuple[bytes, bool]:
        """The body up to max_answer_bytes, and whether it was cut there (the
        rest is never read: closing the connection drops it)."""
        data = resp.read(self.max_answer_bytes + 1)
        return data[: self.max_answer_bytes], len(data) > self.max_answer_bytes

    def _cut_note(self, cut: bool) -> str:
        if not cut:
            return ""
        return f" (the answer was longer than max_answer_bytes = {self.max_answer_bytes} and was cut there)"

    def lookup(self, ctx: EffectCtx) -> Optional[Sent]:
        status, data, cut = self._simple("GET", f"/items?idempotency_key={quote(ctx.idempotency_key, safe='')}", ctx)
        if status == 200 and cut:
            raise RuntimeError(f"lookup answered 200 with an answer longer than max_answer_bytes = "
                               f"{self.max_answer_bytes}: the id in it cannot be read")
        if status == 200 and _id_of(data):
            ref = _id_of(data)
            try:
                check_reference(ref)
            except AnswerError as e:
                raise RuntimeError(f"lookup answered 200: {e}") from None
            return Sent(ref, {"id": ref})
        if status == 404:
            return None
        raise RuntimeError(f"lookup answered {status}")

    def delete(self, ctx: Optional[EffectCtx], external_ref: str) -> None:
        status, _, _ = self._simple("DELETE", f"/items/{quote(external_ref, safe='')}", ctx)
        if not (200 <= status < 300 or status == 404):
            raise RuntimeError(f"delete answered {status}; the item may still be there")

    def _simple(self, method: str, tail: str, ctx: Optional[EffectCtx]) -> Tuple[int, bytes, bool]:
        conn = self._connection(self._timeout(ctx))
        try:
            conn.request(method, self._path(tail))
            resp = conn.getresponse()
            data, cut = self._read(resp)
            return resp.status, data, cut
        except (OSError, socket.timeout, http.client.HTTPException) as e:
            raise RuntimeError(f"{method} {tail}: {e}") from None
        finally:
            conn.close()


def _id_of(data: bytes) -> Optional[str]:
    try:
        value = json.loads(data or b"null")
    except ValueError:
        return None
    ref = value.get("id") if isinstance(value, dict) else None
    # As the Rust destination: a non-empty string or a number; anything else is no id.
    if isinstance(ref, str):
        return ref or None
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):
        return str(ref)
    return None
