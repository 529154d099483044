"""Who holds a claim: ``host:pid:random``, as the Rust core writes it."""
from __future__ import annotations

import os
import secrets
import socket


def new_owner() -> str:
    host = os.environ.get("HOSTNAME") or socket.gethostname() or "host"
    return f"{host.strip()}:{os.getpid()}:{secrets.randbits(32):08x}"
