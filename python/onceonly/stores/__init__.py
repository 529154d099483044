"""Stores: where the operation records live."""
from __future__ import annotations

from ..errors import InvalidInput, redact
from .base import Store
from .params import OpMove


def connect(url: str, schema: str = "onceonly") -> Store:
    """A store for ``sqlite://PATH``, ``sqlite:///ABS/PATH``, ``postgres://...``,
    ``postgresql://...``, ``mysql://USER@HOST:PORT/DATABASE`` or ``mariadb://...``
    (``schema`` is PostgreSQL's; on MySQL the tables live in the URL's database).
    Connections open on first use, one per thread and process."""
    if not isinstance(url, str):
        raise InvalidInput(f"database URL must be a str, not {type(url).__name__}")
    if url.startswith("sqlite://"):
        from .sqlite import SqliteStore

        return SqliteStore(url)
    if url.startswith(("postgres://", "postgresql://")):
        from .postgres import PgStore

        return PgStore(url, schema=schema)
    if url.startswith(("mysql://", "mariadb://")):
        from .mysql import MySqlStore

        return MySqlStore(url)
    raise InvalidInput(f"{redact(url)!r} is not a database URL onceonly knows: "
                       f"use sqlite://PATH, postgres://... or mysql://...")


__all__ = ["Store", "OpMove", "connect"]
