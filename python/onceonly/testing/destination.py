"""A real HTTP destination on 127.0.0.1 that counts what reaches it (DESIGN.md
section 6), for the replay and cross-language tests. Keyed mode keeps one
item per Idempotency-Key; lookup and opaque modes make one item per POST and
answer lookups by key."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional
from urllib.parse import parse_qs, unquote, urlsplit


class Destination:
    """Start with :meth:`start`, stop with :meth:`stop`; counts are per idempotency key."""

    def __init__(self, mode: str = "keyed"):
        if mode not in ("keyed", "lookup", "opaque"):
            raise ValueError(f"unknown destination mode {mode!r}")
        self.mode = mode
        self._lock = threading.Lock()
        self._effects: Counter = Counter()
        self._items: Dict[str, str] = {}  # id -> idempotency key, live items
        self._by_key: Dict[str, List[str]] = {}
        self._next = 0
        self.posts = 0
        self.delay_before_create = 0.0
        self.delay_after_create = 0.0
        self.refuse_deletes = False
        self._server: Optional[ThreadingHTTPServer] = None

    # -- counts ----------------------------------------------------------------
    def effects(self, idempotency_key: str) -> int:
        """Items ever created for the key (withdrawn ones included)."""
        with self._lock:
            return self._effects[idempotency_key]

    def live(self, idempotency_key: str) -> int:
        with self._lock:
            return sum(1 for k in self._items.values() if k == idempotency_key)

    def all_effects(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._effects)

    def reset(self) -> None:
        with self._lock:
            self._effects.clear(), self._items.clear(), self._by_key.clear()
            self.posts = 0

    # -- the server ------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self, port: int = 0) -> "Destination":
        dest = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _answer(self, status: int, body: Optional[dict] = None):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # the client went away (a killed worker)
                    pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                key = self.headers.get("Idempotency-Key") or ""
                if dest.delay_before_create:
                    time.sleep(dest.delay_before_create)
                with dest._lock:
                    dest.posts += 1
                    existing = dest._by_key.get(key) if dest.mode == "keyed" else None
                    if existing:
                        item = existing[0]
                    else:
                        dest._next += 1
                        item = f"item-{dest._next}"
                        dest._items[item] = key
                        dest._by_key.setdefault(key, []).append(item)
                        dest._effects[key] += 1
                if dest.delay_after_create:
                    time.sleep(dest.delay_after_create)
                self._answer(201, {"id": item})

            def do_GET(self):
                url = urlsplit(self.path)
                key = (parse_qs(url.query).get("idempotency_key") or [""])[0]
                with dest._lock:
                    live = [i for i in dest._by_key.get(key, []) if i in dest._items]
                if url.path.endswith("/items") and live:
                    self._answer(200, {"id": live[0]})
                else:
                    self._answer(404, {"error": "not found"})

            def do_DELETE(self):
                item = unquote(urlsplit(self.path).path.rsplit("/", 1)[-1])
                if dest.refuse_deletes:
                    self._answer(503, {"error": "deletes refused"})
                    return
                with dest._lock:
                    found = dest._items.pop(item, None)
                self._answer(200 if found else 404, {})

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="destination", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
