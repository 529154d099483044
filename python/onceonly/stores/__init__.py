"""Stores: where the operation records live."""
from __future__ import annotations

from ..errors import InvalidInput, redact
from .base import Store
from .params import OpMove


def connect(url: str, schema: str = "onceonly") -> Store:
    """A store for ``sqlite://PATH``, ``sqlite:///ABS/PATH``, ``postgres://...`` or
    ``postgresql://...``. Connections open on first use, one per thread and process."""
    if not isinstance(url, str):
        raise InvalidInput(f"database URL must be a str, not {type(url).__name__}")
    if url.startswith("sqlite://"):
        from .sqlite import SqliteStore

        return SqliteStore(url)
    if url.startswith(("postgres://", "postgresql://")):
        from .postgres import PgStore

        return PgStore(url, schema=schema)
    raise InvalidInput(f"{redact(url)!r} is not a database URL onceonly knows: use sqlite://PATH or postgres://...")


__all__ = ["Store", "OpMove", "connect"]
