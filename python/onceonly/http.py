"""An HTTP destination as DESIGN.md section 6 describes it (the one the Rust
relay speaks): send, lookup and delete, each classified into done / not sent
/ unknown / permanent failure. Standard library only."""
from __future__ import annotations

import http.client
import json
import socket
from typing import Optional, Tuple
from urllib.parse import quote, urlsplit

from .canonical import canonical_json
from .effect import EffectCtx, NotSent, OutcomeUnknown, PermanentFailure, Sent
from .errors import InvalidInput


class HttpDestination:
    """``POST BASE/items`` with ``Idempotency-Key: T:K``; lookup by key; delete by id.

    Use its methods as a guard's effect: ``guard.run(key, payload,
    dest.send, lookup=dest.lookup, withdraw=dest.delete)``.
    """

    def __init__(self, base_url: str, timeout: float = 10.0):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f"{base_url!r} is not an http:// or https:// base URL")
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
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
                status, data = resp.status, resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise OutcomeUnknown(f"after the request was written: {type(e).__name__}: {e}") from None
        finally:
            conn.close()
        if 200 <= status < 300:
            ref = _id_of(data)
            if ref is None:
                raise PermanentFailure(f"the destination answered {status} without an id")
            return Sent(ref, {"id": ref})
        if status in (408, 409, 429) or 500 <= status <= 599:
            raise OutcomeUnknown(f"the destination answered {status}")
        raise PermanentFailure(f"the destination answered {status}: {data[:200]!r}")

    def lookup(self, ctx: EffectCtx) -> Optional[Sent]:
        status, data = self._simple("GET", f"/items?idempotency_key={quote(ctx.idempotency_key, safe='')}", ctx)
        if status == 200 and _id_of(data):
            ref = _id_of(data)
            return Sent(ref, {"id": ref})
        if status == 404:
            return None
        raise RuntimeError(f"lookup answered {status}")

    def delete(self, ctx: Optional[EffectCtx], external_ref: str) -> None:
        status, _ = self._simple("DELETE", f"/items/{quote(external_ref, safe='')}", ctx)
        if not (200 <= status < 300 or status == 404):
            raise RuntimeError(f"delete answered {status}; the item may still be there")

    def _simple(self, method: str, tail: str, ctx: Optional[EffectCtx]) -> Tuple[int, bytes]:
        conn = self._connection(self._timeout(ctx))
        try:
            conn.request(method, self._path(tail))
            resp = conn.getresponse()
            return resp.status, resp.read()
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
