"""The user's own connection for local effects: a sqlite3 connection, a
psycopg 3 connection, a PyMySQL or mysqlclient (MySQLdb) connection, a
SQLAlchemy Session or Connection, or a Django connection
(``django.db.connections[alias]``). The claim, the user's writes and the
completion run in one transaction on it."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator

from .errors import InvalidInput


def _is_sqlalchemy(conn: Any) -> bool:
    return type(conn).__module__.startswith("sqlalchemy.")


def _is_django(conn: Any) -> bool:
    # A Django connection, or one lent by onceonly.django (django_connection).
    return type(conn).__module__.startswith("django.db.backends.") or hasattr(conn, "django_connection")


# Django's vendor names, as onceonly's dialects.
_DJANGO_VENDORS = {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mysql"}
# SQLAlchemy's (dialect, driver) pairs, as onceonly's dialects.
_SQLALCHEMY = {("sqlite", "pysqlite"): "sqlite", ("postgresql", "psycopg"): "postgres",
               ("mysql", "pymysql"): "mysql", ("mysql", "mysqldb"): "mysql",
               ("mariadb", "pymysql"): "mysql", ("mariadb", "mysqldb"): "mysql"}
_ACCEPTED = ("a local effect needs a sqlite3, psycopg, PyMySQL or mysqlclient connection, a SQLAlchemy "
             "session or a Django connection")


def _is_mysql(conn: Any) -> bool:
    return type(conn).__module__.split(".")[0] in ("pymysql", "MySQLdb")


def driver_connection(conn: Any) -> Any:
    """The DB-API connection under ``conn`` (itself for sqlite3 and psycopg)."""
    if _is_django(conn):
        conn.ensure_connection()
        return conn.connection
    if _is_sqlalchemy(conn):
        sa_conn = conn.connection() if callable(getattr(conn, "connection", None)) else conn
        return sa_conn.connection.driver_connection
    if isinstance(conn, sqlite3.Connection) or type(conn).__module__.startswith("psycopg") or _is_mysql(conn):
        return conn
    raise InvalidInput(f"{_ACCEPTED}, not {type(conn).__name__}")


def dialect_of(conn: Any) -> str:
    """``sqlite``, ``postgres`` or ``mysql`` for the user's connection, without
    touching it (a SQLAlchemy session would begin a transaction on first use)."""
    if _is_django(conn):
        if conn.vendor not in _DJANGO_VENDORS:
            raise InvalidInput(f"a Django connection to {conn.vendor}: onceonly runs on sqlite, postgresql or mysql")
        return _DJANGO_VENDORS[conn.vendor]
    if _is_sqlalchemy(conn):
        bind = conn.get_bind() if hasattr(conn, "get_bind") else conn.engine
        name, driver = bind.dialect.name, bind.dialect.driver
        if (name, driver) in _SQLALCHEMY:
            return _SQLALCHEMY[(name, driver)]
        raise InvalidInput(f"a SQLAlchemy session on {name}+{driver}: onceonly runs on sqlite (pysqlite), "
                           f"postgresql+psycopg, mysql+pymysql or mysql+mysqldb")
    if isinstance(conn, sqlite3.Connection):
        return "sqlite"
    if type(conn).__module__.startswith("psycopg"):
        return "postgres"
    if _is_mysql(conn):
        return "mysql"
    raise InvalidInput(f"{_ACCEPTED}, not {type(conn).__name__}")


@contextmanager
def transaction(conn: Any) -> Iterator[None]:
    """One transaction on the user's connection: committed when the block ends,
    rolled back when it raises. Inside a transaction the user already opened,
    a savepoint: the user's own commit then decides."""
    if _is_django(conn):
        # Django's own atomic block, so Django knows of the transaction (its
        # on_commit hooks, its savepoints); a psycopg ``transaction()`` here
        # would COMMIT on its own inside a user's atomic block that had not
        # yet run a statement.
        from django.db import transaction as django_transaction

        with django_transaction.atomic(using=conn.alias):
            yield
    elif _is_sqlalchemy(conn):
        with _sqlalchemy(conn):
            yield
    elif isinstance(conn, sqlite3.Connection):
        with _sqlite(conn):
            yield
    elif _is_mysql(conn):
        with _mysql(conn):
            yield
    else:
        with conn.transaction():  # psycopg: a savepoint when already in a transaction
            yield


@contextmanager
def _sqlite(conn: sqlite3.Connection) -> Iterator[None]:
    if conn.in_transaction:
        conn.execute("SAVEPOINT onceonly_local")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO onceonly_local")
            conn.execute("RELEASE onceonly_local")
            raise
        conn.execute("RELEASE onceonly_local")
        return
    # IMMEDIATE: take the write lock now, waiting on the busy timeout, rather
    # than fail busy when the first write comes.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


@contextmanager
def _mysql(conn: Any) -> Iterator[None]:
    from .stores import mysql

    if mysql.in_transaction(conn):
        mysql.execute_text(conn, "SAVEPOINT onceonly_local")
        try:
            yield
        except BaseException:
            try:
                mysql.execute_text(conn, "ROLLBACK TO SAVEPOINT onceonly_local")
                mysql.execute_text(conn, "RELEASE SAVEPOINT onceonly_local")
            except Exception:  # a deadlock rolled the whole transaction back: no savepoint left
                pass
            raise
        mysql.execute_text(conn, "RELEASE SAVEPOINT onceonly_local")
        return
    conn.begin()
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


@contextmanager
def _sqlalchemy(session: Any) -> Iterator[None]:
    nested = session.in_transaction()
    ctx = session.begin_nested() if nested else session.begin()
    with ctx:
        raw = driver_connection(session)
        if isinstance(raw, sqlite3.Connection) and not raw.in_transaction:
            raw.execute("BEGIN IMMEDIATE")  # pysqlite leaves BEGIN to the driver
        yield
