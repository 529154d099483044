"""The store on PostgreSQL with psycopg 3, on the tables and migrations of
crates/onceonly-postgres. The files' ``$N`` parameters run as they are on
psycopg's RawCursor; the schema ``onceonly`` they name is replaced by the
store's schema as the Rust store does (``in_schema``)."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence, Tuple

from ..errors import DatabaseError, InvalidInput, Unreachable, redact
from .. import sqlfiles
from .base import Rows, Store

DEFAULT_SCHEMA = "onceonly"
FILE_SCHEMA = "onceonly"
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]*$")


def validate_schema(schema: str) -> str:
    """``[a-z_][a-z0-9_]*``, at most 63 bytes, not ``pg_...`` (as the Rust store)."""
    if not isinstance(schema, str) or not _SCHEMA.match(schema):
        raise InvalidInput(f"schema {schema!r} is not an identifier; use [a-z_][a-z0-9_]*")
    if len(schema) > 63:
        raise InvalidInput(f"schema {schema!r} is {len(schema)} bytes, the limit is 63")
    if schema.startswith("pg_"):
        raise InvalidInput(f"schema {schema!r} starts with pg_, which PostgreSQL reserves")
    return schema


def in_schema(sql: str, schema: str) -> str:
    """``sql`` with every whole identifier ``onceonly`` replaced by ``"schema"``
    (a port of crates/onceonly-postgres/src/queries.rs ``in_schema``)."""

    def is_ident(c: str) -> bool:
        return c.isascii() and (c.isalnum() or c in '_"$')

    out, rest = [], sql
    while True:
        at = rest.find(FILE_SCHEMA)
        if at < 0:
            break
        before = rest[at - 1] if at > 0 else ""
        after_at = at + len(FILE_SCHEMA)
        after = rest[after_at] if after_at < len(rest) else ""
        out.append(rest[:at])
        if (before and is_ident(before)) or (after and is_ident(after)):
            out.append(FILE_SCHEMA)
        else:
            out.append(f'"{schema}"')
        rest = rest[after_at:]
    out.append(rest)
    return "".join(out)


def migrate_lock_key(schema: str) -> int:
    """FNV-1a of ``onceonly.migrate:<schema>`` as a signed 64-bit key, as the Rust store."""
    h = 0xCBF29CE484222325
    for byte in ("onceonly.migrate:" + schema).encode():
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


@lru_cache(maxsize=None)
def statement(name: str, schema: str) -> str:
    return in_schema(sqlfiles.query("postgres", name), schema)


def _rows(cur) -> Rows:
    if cur.description is None:
        return []
    names = [d.name for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


class PgStore(Store):
    """Records in one PostgreSQL database, in one schema (default ``onceonly``)."""

    dialect = "postgres"

    def __init__(self, url: str, schema: str = DEFAULT_SCHEMA):
        super().__init__(url)
        self.schema = validate_schema(schema)

    def _open(self):
        import psycopg

        try:
            return psycopg.connect(self.url, autocommit=True, application_name="onceonly-python", connect_timeout=10)
        except psycopg.Error as e:
            raise Unreachable(redact(self.url), str(e).strip()) from e

    def _run(self, conn, name: str, args: Sequence) -> Tuple[int, Rows]:
        import psycopg

        try:
            with psycopg.RawCursor(conn) as cur:
                cur.execute(statement(name, self.schema), tuple(args))
                return cur.rowcount, _rows(cur)
        except psycopg.OperationalError as e:
            raise Unreachable(redact(self.url), str(e).strip()) from e
        except psycopg.Error as e:
            raise DatabaseError(f"{name}.sql on {redact(self.url)}: {str(e).strip()}") from e

    def _flag(self, value: bool) -> bool:
        return bool(value)

    def driver_connection(self, conn):
        from ..local import driver_connection

        raw = driver_connection(conn)
        if type(raw).__module__.split(".")[0] != "psycopg":
            raise InvalidInput(f"a PostgreSQL store needs a psycopg 3 connection, not {type(raw).__name__}")
        return raw

    def migrate(self) -> None:
        """Creates or upgrades the tables in one transaction under the same
        advisory lock and bookkeeping (``<schema>.migrations``) as the Rust store."""
        import psycopg

        try:
            conn = psycopg.connect(self.url, connect_timeout=10)
        except psycopg.Error as e:
            raise Unreachable(redact(self.url), str(e).strip()) from e
        try:
            with conn, conn.transaction():
                self._run(conn, "migrate_lock", (migrate_lock_key(self.schema),))
                conn.execute(statement("migrate_setup", self.schema))
                for version, name, sql in sqlfiles.migrations("postgres"):
                    _, done = self._run(conn, "migrate_applied", (version,))
                    if done:
                        continue
                    conn.execute(in_schema(sql, self.schema))
                    self._run(conn, "migrate_record", (version, name))
        except psycopg.Error as e:
            raise DatabaseError(f"migrating {redact(self.url)}: {str(e).strip()}") from e
