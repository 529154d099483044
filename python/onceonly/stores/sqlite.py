"""The store on SQLite, with Python's standard sqlite3 module, on the tables
and migrations of crates/onceonly-sqlite.

SQLite before 3.42 (Debian 12 ships 3.40) has no ``unixepoch('subsec')``: it
returns NULL there. On such a SQLite the store registers
``onceonly_clock_ms()`` on each connection it runs on, reading the same OS
real-time clock SQLite reads (as the Rust store's claim_new.sql binds it),
once per statement, and puts it in place of the files' one clock expression
``CAST(unixepoch('subsec') * 1000 AS INTEGER)``; the statements are otherwise
the files' text.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Sequence, Tuple

from ..canonical import Payload
from ..errors import DatabaseError, InvalidInput, Unreachable, redact
from ..record import Claim
from .. import sqlfiles
from . import params
from .base import Rows, Store

BUSY_TIMEOUT_S = 30.0
CLOCK_EXPR = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
NEEDS_CLOCK_FUNCTION = sqlite3.sqlite_version_info < (3, 42, 0)

# Extra SQL the Rust store keeps inline (crates/onceonly-sqlite/src/in_tx.rs),
# not in a .sql file: the migrations' bookkeeping table, word for word.
MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS onceonly_migrations (
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"""
MIGRATION_APPLIED = "SELECT version FROM onceonly_migrations WHERE version = ?1"
MIGRATION_RECORD = "INSERT INTO onceonly_migrations (version, name, applied_at) VALUES (?1, ?2, datetime('now'))"

_statement_clock = threading.local()


def clock_ms() -> int:
    """SQLite's clock as ``unixepoch('subsec')`` reads it: the OS real-time clock, in ms."""
    return time.time_ns() // 1_000_000


def _pinned_clock() -> int:
    # One reading per statement, as SQLite's own 'now' is stable within one.
    ms = getattr(_statement_clock, "ms", None)
    if ms is None:
        ms = _statement_clock.ms = clock_ms()
    return ms


def statement(name: str) -> str:
    text = sqlfiles.query("sqlite", name)
    return text.replace(CLOCK_EXPR, "onceonly_clock_ms()") if NEEDS_CLOCK_FUNCTION else text


def prepare(conn: sqlite3.Connection) -> None:
    """Makes ``conn`` able to run the store's statements (the clock function on old SQLite)."""
    if NEEDS_CLOCK_FUNCTION:
        conn.create_function("onceonly_clock_ms", 0, _pinned_clock)


def path_of(url: str) -> str:
    """``sqlite://PATH`` (relative) or ``sqlite:///ABS/PATH`` as a file path."""
    if not url.startswith("sqlite://"):
        raise InvalidInput(f"{redact(url)!r} is not a SQLite URL (sqlite://PATH or sqlite:///ABS/PATH)")
    path = url[len("sqlite://"):].split("?", 1)[0]
    if not path or ":memory:" in url or "mode=memory" in url:
        raise InvalidInput(f"{redact(url)!r} names no file: onceonly needs a SQLite file that every worker opens")
    return path


def _rows(cur: sqlite3.Cursor) -> Rows:
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _split(script: str):
    """The statements of a migration file, split where SQLite says one is complete."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            stmt = pending.strip()
            pending = ""
            body = "\n".join(l for l in stmt.splitlines() if not l.strip().startswith("--")).strip()
            if body and body != ";":
                yield stmt


def create_private(path: str) -> None:
    """Creates an empty `path` with mode 0600 unless it exists.

    SQLite would create it 0644 less the umask (any local user reads every
    payload); it gives the -wal and -shm files it creates the database
    file's mode. A file that exists keeps its mode: the operator chose it.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # whatever the umask took away
    finally:
        os.close(fd)


class SqliteStore(Store):
    """Records in one SQLite file (WAL), the tables of crates/onceonly-sqlite."""

    dialect = "sqlite"
    all_rows = -1

    def __init__(self, url: str):
        super().__init__(url)
        self.path = path_of(url)

    def _open(self) -> sqlite3.Connection:
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise Unreachable(redact(self.url), f"folder {folder} does not exist")
        try:
            create_private(self.path)
        except OSError as e:
            raise Unreachable(redact(self.url), f"cannot create {self.path}: {e}") from e
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            raise Unreachable(redact(self.url), str(e)) from e
        prepare(conn)
        return conn

    def _run(self, conn, name: str, args: Sequence) -> Tuple[int, Rows]:
        _statement_clock.ms = None
        try:
            cur = conn.execute(statement(name), tuple(args))
            rows = _rows(cur)
            return cur.rowcount, rows
        except sqlite3.Error as e:
            raise DatabaseError(f"{name}.sql on {redact(self.url)}: {e}") from e

    def _flag(self, value: bool) -> int:
        return int(value)

    def driver_connection(self, conn) -> sqlite3.Connection:
        from ..local import driver_connection

        raw = driver_connection(conn)
        if not isinstance(raw, sqlite3.Connection):
            raise InvalidInput(f"a SQLite store needs a sqlite3 connection, not {type(raw).__name__}")
        prepare(raw)
        return raw

    def claim(self, job, key, owner, payload: Payload, lease_ms):
        # As the Rust store: a plain insert for a new record (the clock bound
        # as ?8), then claim.sql for a queued one, then the row as it stands.
        now = clock_ms()
        args = params.claim(self.clock_offset_ms, job, key, owner, payload.fingerprint, payload.json, lease_ms) + (now,)
        inserted, _ = self._own("claim_new", args)
        if inserted == 1:
            at = now + self.clock_offset_ms
            return Claim(token=1, attempts=1, claimed_at=at, lease_until=at + lease_ms)
        return self._claim_on(None, job, key, owner, payload, lease_ms)

    def migrate(self) -> None:
        """Creates or upgrades the tables, recording each migration as the Rust store does."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")  # the write lock: two migrating processes apply each once
            try:
                conn.execute(MIGRATIONS_TABLE)
                for version, name, sql in sqlfiles.migrations("sqlite"):
                    if conn.execute(MIGRATION_APPLIED, (version,)).fetchone():
                        continue
                    for stmt in _split(sql):
                        conn.execute(stmt)
                    conn.execute(MIGRATION_RECORD, (version, name))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise DatabaseError(f"migrating {redact(self.url)}: {e}") from e
