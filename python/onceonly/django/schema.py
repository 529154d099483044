"""Runs the stores' own migrations (the files tools/sync-sql copies from the
Rust stores, read through :mod:`onceonly.sqlfiles`) on a Django connection,
inside the Django migration's transaction, with the same bookkeeping the
Rust and Python stores write: a database migrated here is one the CLI and
every client see as migrated, and the reverse."""
from __future__ import annotations

from .. import sqlfiles
from ..stores import mysql, postgres, sqlite
from ..stores.postgres import PgStore
from .stores import url_of


def migrate(connection, schema: str) -> None:
    """Creates or upgrades onceonly's tables on Django ``connection`` (idempotent)."""
    connection.ensure_connection()
    raw = connection.connection
    if connection.vendor == "postgresql":
        _postgres(PgStore(url_of(connection.alias), schema=schema), raw)
    elif connection.vendor == "sqlite":
        _sqlite(raw)
    elif connection.vendor == "mysql":
        # As MySqlStore.migrate, on the migration's connection: MySQL commits
        # DDL at once (Django runs this migration outside a transaction), so
        # the named lock serialises two migrating processes.
        mysql.migrate_on(raw, url_of(connection.alias))
    else:
        raise NotImplementedError(f"onceonly has no store for {connection.vendor}; use sqlite, postgresql or mysql")


def _postgres(store: PgStore, raw) -> None:
    # As PgStore.migrate, on the migration's connection: the advisory lock
    # (held to the transaction's end) serialises two migrating processes.
    store._run(raw, "migrate_lock", (postgres.migrate_lock_key(store.schema),))
    raw.execute(postgres.statement("migrate_setup", store.schema))
    for version, name, sql in sqlfiles.migrations("postgres"):
        _, done = store._run(raw, "migrate_applied", (version,))
        if done:
            continue
        raw.execute(postgres.in_schema(sql, store.schema))
        affected, _ = store._run(raw, "migrate_record", (version, name))
        if affected != 1:
            raise RuntimeError(f"recording migration {version} inserted {affected} rows")


def _sqlite(raw) -> None:
    # As SqliteStore.migrate; Django's migration already holds the transaction.
    sqlite.prepare(raw)
    raw.execute(sqlite.MIGRATIONS_TABLE)
    for version, name, sql in sqlfiles.migrations("sqlite"):
        if raw.execute(sqlite.MIGRATION_APPLIED, (version,)).fetchone():
            continue
        for stmt in sqlite._split(sql):
            raw.execute(stmt)
        cur = raw.execute(sqlite.MIGRATION_RECORD, (version, name))
        if cur.rowcount != 1:
            raise RuntimeError(f"recording migration {version} inserted {cur.rowcount} rows")


__all__ = ["migrate"]
