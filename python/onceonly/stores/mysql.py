"""The store on MySQL and MariaDB, with PyMySQL or mysqlclient (MySQLdb), on
the tables, migrations and statements of crates/onceonly-mysql (tested on
MariaDB 10.11; see that crate's src/lib.rs for the traps and how each is
closed).

What this client does on top of the files' text:

- The files bind ``?`` by position, in the order each file's header lists;
  the drivers take ``%s``. :func:`statement` turns the one into the other
  (outside quotes and comments), and :data:`BINDS` puts the shared numbered
  arguments of :mod:`onceonly.stores.params` in each file's order.
- Affected rows: PyMySQL and mysqlclient count the rows an UPDATE *changed*,
  unless connected with CLIENT_FOUND_ROWS (Django's MySQL backend sets it),
  when they count the rows it *matched*. Every statement that decides who
  acts changes the row it matches (a new token or state, and always
  ``version = version + 1``), so its count means the same either way; the
  tests run both drivers in both modes.
- No ``UPDATE ... RETURNING``: a claim reads the clock, inserts the record
  claimed (1: ours, token 1), and on a duplicate key (1062) reads the record
  and claims it fenced on the token read (1: ours). It reports what it
  wrote. A take-over and a heartbeat read their row back in the transaction
  that wrote it.
- Each of the store's own connections adds ``STRICT_ALL_TABLES`` to its
  ``sql_mode`` (checked: a value too long for its column is refused, never
  cut) and reads the clock in ``time_zone = '+00:00'``. The user's connection
  (a local effect) must be strict too: it is checked once, never changed.
- Deadlock (1213) and lock wait timeout (1205): work on the store's own
  connections runs again from its first statement, at most
  :data:`MAX_ATTEMPTS` times; in the user's transaction the error goes to
  the caller (a deadlock rolled the user's writes back too).
"""
from __future__ import annotations

import threading
import time
import weakref
from functools import lru_cache
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import parse_qsl, unquote, urlsplit

from ..canonical import Payload
from ..errors import DatabaseError, InvalidInput, Unreachable, redact
from ..record import Claim, Record, Snapshot, State
from .. import sqlfiles
from . import params
from .base import Rows, Store

T = TypeVar("T")

#: the drivers this store opens its own connections with, in the order tried
DRIVERS = ("pymysql", "mysqlclient")

#: attempts at most of work that met a deadlock or a lock wait, the first included
MAX_ATTEMPTS = 5

#: how long migrate waits for another process's migration, in seconds
MIGRATE_WAIT_S = 60

#: LIMIT for "no limit": MySQL has no LIMIT ALL
NO_LIMIT = 2**63 - 1

#: identity collations that compare bytewise with trailing spaces significant
BINARY_COLLATIONS = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")

# MySQL's error numbers, where a decision depends on them.
DUP_ENTRY = 1062
LOCK_WAIT_TIMEOUT = 1205
DEADLOCK = 1213
LOCK_NOWAIT = 3572  # MySQL 8's NOWAIT
DATA_TOO_LONG = 1406
UNKNOWN_SYSTEM_VARIABLE = 1193
#: refusals at connect (access denied, unknown database, too many connections)
#: and a connection gone (can't connect, server gone away, lost connection)
UNREACHABLE = (1040, 1044, 1045, 1049, 2002, 2003, 2005, 2006, 2013, 2055)

# The numbered arguments of onceonly.stores.params (1-based) in the order of
# each file's `?`s. Files only this store runs (claim_insert, claim_update,
# the reads back) are bound where they are run.
BINDS: Dict[str, Tuple[int, ...]] = {
    # offset, to, external_ref, result, error, retry ms, job_type, op_key, token, from, unless cancel
    "move": (1, 6, 7, 8, 9, 11, 2, 3, 4, 5, 10),
    # offset, to, owner, lease ms, reason, job_type, op_key, stale token
    "take_over": (1, 5, 6, 7, 8, 2, 3, 4),
    # offset, lease ms, job_type, op_key, token
    "heartbeat": (1, 5, 2, 3, 4),
    # offset, job_type, op_key, token
    "request_cancel": (1, 2, 3, 4),
    # offset, job_type, op_key
    "get": (1, 2, 3),
    "get_latest": (1, 2, 3),
    # job_type, op_key, fingerprint, payload, delay ms, offset
    "enqueue": (2, 3, 4, 5, 6, 1),
    # job_type, op_key, event, actor, token, from, to, detail, attempt, retry ms, offset
    "audit": (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1),
    "history": (1, 2),
    # job_type, same, page size, rows skipped
    "operator_held": (2, 2, 3, 4),
    # offset, job_type, same, page size, rows skipped
    "operator_stuck": (1, 2, 2, 3, 4),
    "now": (1,),
}


def placeholders(sql: str) -> str:
    """``sql`` with each ``?`` outside quotes and comments as ``%s`` and each
    ``%`` as ``%%`` (the drivers' format style); ``--`` comments dropped."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "'\"`":
            end = i + 1
            while end < n and sql[end] != c:
                end += 2 if sql[end] == "\\" else 1
            out.append(sql[i:end + 1].replace("%", "%%"))
            i = end + 1
            continue
        out.append("%s" if c == "?" else "%%" if c == "%" else c)
        i += 1
    return "".join(out).strip()


@lru_cache(maxsize=None)
def statement(name: str) -> str:
    return placeholders(sqlfiles.query("mysql", name))


def count_binds(name: str) -> int:
    """How many values ``name``.sql binds."""
    return statement(name).count("%s")


def _bound(name: str, args: Sequence) -> Tuple:
    order = BINDS.get(name)
    return tuple(args) if order is None else tuple(args[i - 1] for i in order)


# -- the drivers ----------------------------------------------------------------------
def driver_of(conn: Any) -> Optional[str]:
    """``pymysql`` or ``mysqlclient`` for a DB-API connection of either, else None."""
    top = type(conn).__module__.split(".")[0]
    return {"pymysql": "pymysql", "MySQLdb": "mysqlclient"}.get(top)


def _module(driver: str):
    if driver == "pymysql":
        import pymysql
        import pymysql.constants.CLIENT  # noqa: F401 (the flags)

        return pymysql
    if driver == "mysqlclient":
        import MySQLdb
        import MySQLdb.constants.CLIENT  # noqa: F401 (the flags)

        return MySQLdb
    raise InvalidInput(f"MySQL driver {driver!r}: use one of {', '.join(DRIVERS)}")


def available_driver() -> str:
    """The first of :data:`DRIVERS` that is installed."""
    for name in DRIVERS:
        try:
            _module(name)
            return name
        except ImportError:
            continue
    raise InvalidInput("a MySQL store needs PyMySQL or mysqlclient: pip install 'onceonly[mysql]'")


def _is_driver_error(e: BaseException) -> bool:
    top = type(e).__module__.split(".")[0]
    return top in ("pymysql", "MySQLdb", "_mysql")


def errno(e: BaseException) -> Optional[int]:
    """The MySQL error number of a driver error (both drivers put it first in args)."""
    if _is_driver_error(e) and e.args and isinstance(e.args[0], int):
        return e.args[0]
    return None


def _message(e: BaseException) -> str:
    if len(e.args) >= 2:
        return f"({e.args[0]}) {e.args[1]}"
    return str(e) or type(e).__name__


def is_transient(e: BaseException) -> bool:
    """A deadlock or a lock wait timeout: running the work again may succeed."""
    return errno(e) in (DEADLOCK, LOCK_WAIT_TIMEOUT)


def _closed(e: BaseException) -> bool:
    # PyMySQL raises InterfaceError(0, '') on a closed connection; mysqlclient
    # InterfaceError / OperationalError(2006).
    return _is_driver_error(e) and type(e).__name__ == "InterfaceError"


def map_error(e: BaseException, url: str, what: str) -> Exception:
    """A driver error as onceonly's: too long, unreachable, or any other."""
    n = errno(e)
    if n == DATA_TOO_LONG:
        return InvalidInput(f"refused by MySQL, nothing written: {_message(e)} (the value is longer than its column)")
    if n in UNREACHABLE or _closed(e):
        return Unreachable(redact(url), _message(e))
    return DatabaseError(f"{what} on {redact(url)}: {_message(e)}")


# -- the URL --------------------------------------------------------------------------
def connect_args(url: str) -> Dict[str, Any]:
    """The drivers' keyword arguments for ``mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE``
    (or ``mariadb://``); ``?socket=PATH`` for a Unix socket. A URL that names
    no database is refused: the tables live in the URL's database."""
    shown = redact(url)
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb"):
        raise InvalidInput(f"{shown!r} is not a MySQL URL (mysql://user@host:3306/DATABASE)")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise InvalidInput(f"{shown!r} names no database: onceonly keeps its tables in the URL's database "
                           f"(mysql://user@host:3306/DATABASE)")
    try:
        port = parts.port or 3306
    except ValueError as e:
        raise InvalidInput(f"{shown!r} has a bad port: {e}") from None
    args: Dict[str, Any] = {
        "host": parts.hostname or "localhost", "port": port, "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""), "database": database,
    }
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "socket":
            args["unix_socket"] = value
        else:
            # Refused by name: an ignored option (say, ssl-mode) would connect otherwise than asked.
            raise InvalidInput(f"{shown!r}: option {key!r} is not one this client reads (known: socket)")
    return args


# -- running statements ---------------------------------------------------------------
def execute(conn, name: str, args: Sequence = ()) -> Tuple[int, Rows]:
    """Runs ``name``.sql on a driver connection with ``args`` in the file's
    order: (affected rows, rows as dicts). Driver errors pass through."""
    sql = statement(name)
    cur = conn.cursor()
    try:
        cur.execute(sql, tuple(args) if args else None)
        rows: Rows = []
        if cur.description is not None:
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, row)) for row in cur.fetchall()]
        return cur.rowcount, rows
    finally:
        cur.close()


def execute_text(conn, sql: str) -> None:
    """Runs a migration file's one statement as text (no binds, no ``%`` formatting)."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
    finally:
        cur.close()


def in_transaction(conn) -> bool:
    """Whether the user's connection has a transaction open (MariaDB's
    ``@@in_transaction``; MySQL 8 lacks it, and is refused by name)."""
    try:
        _, rows = execute(conn, "session_in_transaction")
    except Exception as e:
        if errno(e) == UNKNOWN_SYSTEM_VARIABLE:
            raise InvalidInput("this server has no @@in_transaction (MySQL, not MariaDB): hand onceonly a "
                               "Django connection or a SQLAlchemy session, whose transaction it can see") from e
        raise
    return bool(rows[0]["in_transaction"])


class _Duplicate(Exception):
    """The insert met an existing key (1062)."""


def _strict(mode: str) -> bool:
    return any(m in ("STRICT_ALL_TABLES", "STRICT_TRANS_TABLES") for m in mode.split(","))


class MySqlStore(Store):
    """Records in one MySQL or MariaDB database (the URL's), in the tables
    ``onceonly_ops``, ``onceonly_audit`` and ``onceonly_migrations``.

    ``driver``: ``"pymysql"`` or ``"mysqlclient"`` for the store's own
    connections (default: the first installed). ``found_rows``: connect them
    with CLIENT_FOUND_ROWS, as Django's backend does (the counts mean the same
    either way; the tests run both).
    """

    dialect = "mysql"
    all_rows = NO_LIMIT

    def __init__(self, url: str, driver: Optional[str] = None, found_rows: bool = False):
        super().__init__(url)
        self.connect_args = connect_args(url)
        self.driver = driver or available_driver()
        _module(self.driver)  # an unknown or missing driver is refused here, not at first use
        self.found_rows = found_rows
        #: work run again after a deadlock or lock wait, by this store
        self.lock_retries = 0
        self._strict_checked: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    # -- connections ------------------------------------------------------------------
    def connect_raw(self, autocommit: bool = True, found_rows: Optional[bool] = None):
        """A new driver connection to the store's database, in strict mode and
        the UTC zone (checked); the caller closes it."""
        module = _module(self.driver)
        flags = 0
        if self.found_rows if found_rows is None else found_rows:
            flags |= module.constants.CLIENT.FOUND_ROWS
        try:
            conn = module.connect(**self.connect_args, charset="utf8mb4", autocommit=autocommit,
                                  client_flag=flags, connect_timeout=10)
        except Exception as e:
            if _is_driver_error(e):
                raise Unreachable(redact(self.url), _message(e)) from e
            raise
        try:
            execute(conn, "session_strict")
            execute(conn, "session_time_zone")
            _, rows = execute(conn, "session_sql_mode")
        except Exception as e:
            conn.close()
            if _is_driver_error(e):
                raise map_error(e, self.url, "setting up the session") from e
            raise
        mode = rows[0]["sql_mode"]
        if "STRICT_ALL_TABLES" not in mode.split(","):
            conn.close()
            raise InvalidInput(f"{redact(self.url)}: the session's sql_mode {mode!r} lacks STRICT_ALL_TABLES "
                               f"after setting it; too-long keys would be cut")
        return conn

    def _open(self):
        return self.connect_raw()

    def _flag(self, value: bool) -> bool:
        return bool(value)

    def driver_connection(self, conn):
        from ..local import driver_connection

        raw = driver_connection(conn)
        if driver_of(raw) is None:
            raise InvalidInput(f"a MySQL store needs a PyMySQL or mysqlclient connection, not {type(raw).__name__}")
        self._check_strict(raw)
        return raw

    def _check_strict(self, raw) -> None:
        """The user's session must refuse a too-long value (it is checked, never changed)."""
        try:
            if self._strict_checked.get(raw):
                return
        except TypeError:  # not weakly referenceable: checked every time
            pass
        _, rows = self._checked(raw, "session_sql_mode", ())
        mode = rows[0]["sql_mode"]
        if not _strict(mode):
            raise InvalidInput(
                f"the connection's sql_mode {mode!r} is not strict: MySQL would cut a value too long for its "
                f"column instead of refusing it; add STRICT_TRANS_TABLES (Django: OPTIONS "
                f"{{'init_command': \"SET sql_mode='STRICT_TRANS_TABLES'\"}})")
        try:
            self._strict_checked[raw] = True
        except TypeError:
            pass

    # -- running statements -----------------------------------------------------------
    def _checked(self, conn, name: str, args: Sequence) -> Tuple[int, Rows]:
        """:func:`execute` with the driver's errors as onceonly's; a duplicate key as :class:`_Duplicate`."""
        try:
            return execute(conn, name, args)
        except Exception as e:
            if not _is_driver_error(e):
                raise
            if errno(e) == DUP_ENTRY:
                raise _Duplicate(_message(e)) from e
            raise map_error(e, self.url, f"{name}.sql") from e

    def _run(self, conn, name: str, args: Sequence) -> Tuple[int, Rows]:
        """Statement ``name`` with the shared numbered arguments, in the file's order."""
        try:
            return self._checked(conn, name, _bound(name, args))
        except _Duplicate as e:
            raise DatabaseError(f"{name}.sql on {redact(self.url)}: duplicate key: {e}") from None

    def _retried(self, work: Callable[[Any], T]) -> T:
        """``work(conn)`` on the store's own connection, run again from its
        first statement after a deadlock or lock wait (at most
        :data:`MAX_ATTEMPTS` times); a broken connection is dropped."""
        attempt = 1
        while True:
            try:
                return work(self._conn())
            except (DatabaseError, Unreachable) as e:
                cause = e.__cause__
                if cause is not None and is_transient(cause) and attempt < MAX_ATTEMPTS:
                    # The server rolled back the statement (1205) or the
                    # transaction (1213); the connection itself is sound.
                    with self._lock:
                        self.lock_retries += 1
                    time.sleep(0.005 * attempt)
                    attempt += 1
                    continue
                self._drop_conn()  # a broken connection is not reused
                raise

    def _own(self, name: str, args: Sequence) -> Tuple[int, Rows]:
        return self._retried(lambda conn: self._run(conn, name, args))

    def _in_tx(self, conn, work: Callable[[Any], T]) -> T:
        """``work(conn)`` in one transaction on the store's own (autocommit) connection."""
        self._driver_call(conn.begin, "BEGIN")
        try:
            done = work(conn)
        except BaseException:
            try:
                conn.rollback()
            except Exception:  # the connection is broken; _retried drops it
                pass
            raise
        self._driver_call(conn.commit, "COMMIT")
        return done

    def _driver_call(self, call: Callable[[], Any], what: str) -> None:
        try:
            call()
        except Exception as e:
            if _is_driver_error(e):
                raise map_error(e, self.url, what) from e
            raise

    # -- the statements that differ from the other databases --------------------------
    def _claim_on(self, conn, job, key, owner, payload: Payload, lease_ms):
        if conn is None:
            return self._retried(lambda own: self._claim(own, job, key, owner, payload, lease_ms, False))
        return self._claim(conn, job, key, owner, payload, lease_ms, True)

    def _claim(self, conn, job: str, key: str, owner: str, payload: Payload, lease_ms: int,
               in_tx: bool) -> Union[Claim, Snapshot]:
        """Reads the clock, inserts the record claimed; on a duplicate key reads
        it and claims it fenced on the token read. ``in_tx``: the user's
        transaction, whose snapshot may be older than the row the insert met,
        so the row is read with a locking read."""
        _, rows = self._checked(conn, "now", (self.clock_offset_ms,))
        now = int(rows[0]["now"])
        lease_until = now + lease_ms
        try:
            n, _ = self._checked(conn, "claim_insert", (
                job, key, owner, payload.fingerprint, payload.json, now, lease_until, now, now))
        except _Duplicate:
            pass
        else:
            if n != 1:
                raise DatabaseError(f"claim insert of {job}:{key} affected {n} rows")
            return Claim(token=1, attempts=1, claimed_at=now, lease_until=lease_until)
        snap = self._read(conn, job, key, in_tx)
        if snap is None:
            raise DatabaseError(f"{job}:{key} conflicted on claim but is gone (purged meanwhile?)")
        # Not claimable as read: no update, so no exclusive lock. In the user's
        # transaction the duplicate key left a shared lock on the row; workers
        # racing on one key would each ask to upgrade it and deadlock (1213).
        r = snap.record
        if not (r.state is State.QUEUED and r.fingerprint == payload.fingerprint
                and (r.due_at is None or r.due_at <= now)):
            return snap
        n, _ = self._checked(conn, "claim_update", (
            owner, now, lease_until, now, job, key, r.token, payload.fingerprint, now))
        if n == 1:
            return Claim(token=r.token + 1, attempts=r.attempts + 1, claimed_at=now, lease_until=lease_until)
        if n != 0:
            raise DatabaseError(f"claim update of {job}:{key} affected {n} rows")
        # Claimable when read, gone by the update: someone else moved it.
        snap = self._read(conn, job, key, in_tx)
        if snap is None:
            raise DatabaseError(f"{job}:{key} conflicted on claim but is gone (purged meanwhile?)")
        return snap

    def _read(self, conn, job: str, key: str, latest: bool) -> Optional[Snapshot]:
        _, rows = self._run(conn, "get_latest" if latest else "get", params.get(self.clock_offset_ms, job, key))
        return Snapshot(Record.from_row(rows[0]), int(rows[0]["now"])) if rows else None

    def take_over(self, job: str, key: str, stale_token: int, to: State, owner: str, lease_ms: int,
                  reason: str) -> Optional[Claim]:
        args = params.take_over(self.clock_offset_ms, job, key, stale_token, to, owner, lease_ms, reason)

        def work(conn) -> Optional[Claim]:
            n, _ = self._run(conn, "take_over", args)
            if n == 0:
                return None
            if n != 1:
                raise DatabaseError(f"take-over of {job}:{key} affected {n} rows")
            _, rows = self._checked(conn, "take_over_read", (job, key, stale_token + 1))
            if not rows:
                raise DatabaseError(f"take-over of {job}:{key}: row gone")
            return Claim.from_row(rows[0])

        return self._retried(lambda conn: self._in_tx(conn, work))

    def heartbeat(self, job: str, key: str, token: int, lease_ms: int) -> Optional[Tuple[int, bool]]:
        args = params.heartbeat(self.clock_offset_ms, job, key, token, lease_ms)

        def work(conn) -> Optional[Tuple[int, bool]]:
            n, _ = self._run(conn, "heartbeat", args)
            if n == 0:
                return None
            if n != 1:
                raise DatabaseError(f"heartbeat of {job}:{key} affected {n} rows")
            _, rows = self._checked(conn, "heartbeat_read", (job, key, token))
            return (int(rows[0]["lease_until"]), bool(rows[0]["cancel_requested"])) if rows else None

        return self._retried(lambda conn: self._in_tx(conn, work))

    def enqueue(self, job: str, key: str, payload: Payload, delay_ms: int = 0, conn=None) -> bool:
        args = _bound("enqueue", params.enqueue(self.clock_offset_ms, job, key, payload.fingerprint,
                                                payload.json, delay_ms))

        def work(c) -> bool:
            try:
                n, _ = self._checked(c, "enqueue", args)
            except _Duplicate:
                return False
            if n != 1:
                raise DatabaseError(f"enqueue of {job}:{key} affected {n} rows")
            return True

        if conn is not None:
            return work(self.driver_connection(conn))
        return self._retried(work)

    def get(self, job: str, key: str, conn=None, raw: bool = False) -> Optional[Snapshot]:
        """One record with the database's time; on the user's connection, the
        latest committed row (a locking read) rather than its snapshot."""
        if conn is None:
            return self._retried(lambda own: self._read(own, job, key, False))
        if not raw:
            conn = self.driver_connection(conn)
        return self._read(conn, job, key, True)

    # -- migrations -------------------------------------------------------------------
    def migrate(self) -> None:
        """Creates or upgrades the tables under the same named lock and
        bookkeeping (``onceonly_migrations``) as the Rust store, then checks
        that the identity columns compare bytewise."""
        conn = self.connect_raw()
        try:
            migrate_on(conn, self.url)
        finally:
            conn.close()

    def check_collations(self) -> None:
        """Refuses tables whose ``job_type`` or ``op_key`` fold case or pad spaces."""
        check_collations(self._conn(), self.url)


def migrate_on(conn, url: str, wait_s: int = MIGRATE_WAIT_S) -> int:
    """Applies the migrations not yet recorded on driver connection ``conn``
    under the database's migration lock; returns how many. DDL commits at
    once in MySQL, so each file is idempotent on its own (IF NOT EXISTS)."""
    try:
        _, rows = execute(conn, "migrate_lock", (wait_s,))
        if rows[0]["got"] != 1:
            raise DatabaseError(f"another process held the migration lock of {redact(url)} for {wait_s}s")
        try:
            execute(conn, "migrate_setup")
            applied = 0
            for version, name, sql in sqlfiles.migrations("mysql"):
                _, done = execute(conn, "migrate_applied", (version,))
                if done:
                    continue
                execute_text(conn, sql)
                n, _ = execute(conn, "migrate_record", (version, name))
                if n != 1:
                    raise DatabaseError(f"recording migration {version} inserted {n} rows")
                applied += 1
        finally:
            execute(conn, "migrate_unlock")
    except Exception as e:
        if _is_driver_error(e):
            raise map_error(e, url, "migrating") from e
        raise
    check_collations(conn, url)
    return applied


def check_collations(conn, url: str) -> None:
    try:
        _, rows = execute(conn, "identity_collations")
    except Exception as e:
        if _is_driver_error(e):
            raise map_error(e, url, "identity_collations.sql") from e
        raise
    bad = [f"{r['table_name']}.{r['column_name']} is {r['collation_name']}" for r in rows
           if r["collation_name"] not in BINARY_COLLATIONS]
    if bad:
        raise InvalidInput(f"{redact(url)}: {'; '.join(bad)}: `k`, `K` and `k ` would be one operation; "
                           f"the identity columns must be {' or '.join(BINARY_COLLATIONS)}")
