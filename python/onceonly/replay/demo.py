"""The replay's own tables (not the protocol's): the local effect's rows and
the naive job's done-marks, in the database under test. Like the Rust
replay's demo_*.sql, this SQL belongs to the demo, not to onceonly."""
from __future__ import annotations

import sqlite3
from typing import Any, Dict

TABLES = (
    "CREATE TABLE IF NOT EXISTS onceonly_replay_effects (job TEXT NOT NULL, op_key TEXT NOT NULL, pid INTEGER)",
    "CREATE TABLE IF NOT EXISTS onceonly_replay_naive (job TEXT NOT NULL, op_key TEXT NOT NULL)",
)


def connect(db: str):
    """The user's own connection to the database under test (sqlite3, psycopg,
    or PyMySQL / mysqlclient, whichever the MySQL store would use)."""
    if db.startswith("sqlite://"):
        from ..stores.sqlite import path_of

        return sqlite3.connect(path_of(db), timeout=30)
    if db.startswith(("mysql://", "mariadb://")):
        from ..stores import mysql

        return mysql._module(mysql.available_driver()).connect(**mysql.connect_args(db), charset="utf8mb4")
    import psycopg

    return psycopg.connect(db)


def ph(conn) -> str:
    return "?" if isinstance(conn, sqlite3.Connection) else "%s"


def _q(conn, sql: str, args=()):
    """``sql`` on a cursor of ``conn`` (every driver here has one; not every one has ``execute``)."""
    cur = conn.cursor()
    cur.execute(sql, args)
    return cur


def create(db: str) -> None:
    conn = connect(db)
    try:
        for sql in TABLES:
            _q(conn, sql)
        conn.commit()
    finally:
        conn.close()


def insert_effect(conn, job: str, key: str, pid: int) -> None:
    p = ph(conn)
    _q(conn, f"INSERT INTO onceonly_replay_effects (job, op_key, pid) VALUES ({p}, {p}, {p})", (job, key, pid))


def effects_by_key(db: str, job: str) -> Dict[str, int]:
    conn = connect(db)
    try:
        p = ph(conn)
        rows = _q(conn, f"SELECT op_key, count(*) FROM onceonly_replay_effects WHERE job = {p} GROUP BY op_key", (job,)).fetchall()
        return {k: int(n) for k, n in rows}
    finally:
        conn.close()


def naive_done(conn, job: str, key: str) -> bool:
    p = ph(conn)
    return _q(conn, f"SELECT 1 FROM onceonly_replay_naive WHERE job = {p} AND op_key = {p}", (job, key)).fetchone() is not None


def naive_mark(conn, job: str, key: str) -> None:
    p = ph(conn)
    _q(conn, f"INSERT INTO onceonly_replay_naive (job, op_key) VALUES ({p}, {p})", (job, key))


def naive_unmark(db: str, job: str, key: str) -> None:
    """A late failure written over the naive job's success: its mark is gone."""
    conn = connect(db)
    try:
        p = ph(conn)
        _q(conn, f"DELETE FROM onceonly_replay_naive WHERE job = {p} AND op_key = {p}", (job, key))
        conn.commit()
    finally:
        conn.close()


def record_states(store, job: str, keys) -> Dict[str, Any]:
    states: Dict[str, int] = {}
    for k in keys:
        snap = store.get(job, k)
        if snap is not None:
            states[snap.record.state.value] = states.get(snap.record.state.value, 0) + 1
    return states
