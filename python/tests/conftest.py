"""Test helpers: a fresh database per test (a SQLite file, a PostgreSQL schema
or database, a MySQL database), the Rust CLI, and skip-unless-CI for
unreachable servers: every test that needs a server (PostgreSQL, MySQL,
RabbitMQ, Redis) asks ``need_server`` (``need_postgres``, ``need_mysql``) or
a database fixture, and each decides through ``unreachable``."""
from __future__ import annotations

import os
import pathlib
import secrets
import socket
import subprocess
import sys
import urllib.parse

import pytest

import onceonly
from onceonly.stores.postgres import PgStore
from onceonly.stores.sqlite import SqliteStore

REPO = pathlib.Path(__file__).resolve().parents[2]
CI = os.environ.get("CI") == "true"
PG_URL = os.environ.get("ONCEONLY_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
PG_ADMIN = PG_URL.rsplit("/", 1)[0] + "/postgres"
MYSQL_URL = os.environ.get("ONCEONLY_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
#: every test's own MySQL database starts with this (dropped after the test)
MYSQL_PREFIX = "mysqlpython_"


def unreachable(what: str, why: object):
    """The rule, once: fails under CI; elsewhere skips with a loud message."""
    msg = f"{what} unreachable: {why}"
    if CI:
        pytest.fail(msg + " (CI=true: a server the tests need must be up)")
    print(f"\n*** SKIPPING: {msg} ***", file=sys.stderr)
    pytest.skip(msg)


DEFAULT_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "amqp": 5672, "redis": 6379}


def need_server(url: str):
    """Returns when something answers on the URL's host and port within 2s;
    otherwise ``unreachable`` (fail under CI, skip loudly elsewhere)."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or DEFAULT_PORTS[parts.scheme]
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as e:
        unreachable(url, e)


def need_postgres():
    """The tests' PostgreSQL server answers (``need_server`` on ONCEONLY_TEST_PG)."""
    need_server(PG_URL)


def need_mysql():
    """The tests' MySQL server answers (``need_server`` on ONCEONLY_TEST_MYSQL)."""
    need_server(MYSQL_URL)


def _pg_admin():
    import psycopg

    try:
        return psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5)
    except psycopg.Error as e:
        unreachable("PostgreSQL at " + PG_ADMIN, e)


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path}/ops.db"


@pytest.fixture
def sqlite_store(sqlite_url):
    store = SqliteStore(sqlite_url)
    store.migrate()
    yield store
    store.close()


@pytest.fixture
def pg_store():
    admin = _pg_admin()
    admin.close()
    schema = "t_" + secrets.token_hex(6)
    store = PgStore(PG_URL, schema=schema)
    store.migrate()
    yield store
    store.close()
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as c:
        c.execute(f'DROP SCHEMA "{schema}" CASCADE')


def mysql_admin():
    """A PyMySQL connection to the test server (autocommit), or unreachable."""
    import pymysql

    from onceonly.stores.mysql import connect_args

    args = connect_args(MYSQL_URL)
    try:
        return pymysql.connect(**args, charset="utf8mb4", autocommit=True, connect_timeout=5)
    except pymysql.MySQLError as e:
        unreachable("MySQL at " + MYSQL_URL, e)


@pytest.fixture
def mysql_database():
    """A fresh MySQL database's URL; dropped after the test."""
    admin = mysql_admin()
    name = MYSQL_PREFIX + secrets.token_hex(5)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    yield MYSQL_URL.rsplit("/", 1)[0] + "/" + name
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    admin.close()


def mysql_store_of(url: str, driver: str = "pymysql", found_rows: bool = False):
    from onceonly.stores.mysql import MySqlStore

    store = MySqlStore(url, driver=driver, found_rows=found_rows)
    store.migrate()
    return store


# The two corners of (driver, CLIENT_FOUND_ROWS): the store's own connections
# count changed rows on PyMySQL and matched rows on mysqlclient here, so every
# store test runs in both modes (test_mysql.py runs all four).
MYSQL_MODES = {"mysql": ("pymysql", False), "mysqlclient_found_rows": ("mysqlclient", True)}


class MySqlUser:
    """The user's own PyMySQL or mysqlclient connection (the DB-API default:
    autocommit off), with the ``execute`` the other drivers' tests call."""

    def __init__(self, url, driver="pymysql"):
        from onceonly.stores.mysql import _module, connect_args

        self.raw = _module(driver).connect(**connect_args(url), charset="utf8mb4")

    def execute(self, sql, args=None):
        cur = self.raw.cursor()
        cur.execute(sql, args)
        return cur

    def commit(self):
        self.raw.commit()

    def rollback(self):
        self.raw.rollback()

    def close(self):
        self.raw.close()


@pytest.fixture
def mysql_store(mysql_database):
    store = mysql_store_of(mysql_database)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "pg", *MYSQL_MODES])
def store(request):
    if request.param in MYSQL_MODES:
        s = mysql_store_of(request.getfixturevalue("mysql_database"), *MYSQL_MODES[request.param])
        yield s
        s.close()
    else:
        yield request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
def pg_database():
    """A fresh PostgreSQL database (the Rust CLI always uses the schema onceonly)."""
    admin = _pg_admin()
    name = "onceonly_py_" + secrets.token_hex(5)
    admin.execute(f'CREATE DATABASE "{name}"')
    yield PG_URL.rsplit("/", 1)[0] + "/" + name
    admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def db_url(request, tmp_path):
    """A database URL the Rust CLI and Python both open, of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    if request.param == "mysql":
        return request.getfixturevalue("mysql_database")
    return request.getfixturevalue("pg_database")


@pytest.fixture(scope="session")
def cli() -> str:
    """The onceonly binary: $ONCEONLY_BIN, else the repository's debug build (built if missing)."""
    path = os.environ.get("ONCEONLY_BIN")
    if path:
        return path
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    binary = target / "debug" / "onceonly"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-p", "onceonly-cli"], cwd=REPO, check=True)
    return str(binary)


@pytest.fixture
def destination():
    from onceonly.testing.destination import Destination

    dest = Destination("keyed").start()
    yield dest
    dest.stop()


def spec(job="mail", **kw) -> onceonly.JobSpec:
    return onceonly.JobSpec.build(job, **kw)
