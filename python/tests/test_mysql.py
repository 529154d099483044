"""What MySQL and MariaDB do differently, closed in the MySQL store: affected
rows with CLIENT_FOUND_ROWS and without, for both drivers; the identity
collation; strict mode; lock waits; the user's transaction."""
import threading
import time

import pytest

import onceonly
from onceonly import Done, Guard, InProgress, Payload, State
from onceonly.stores import OpMove, mysql
from onceonly.stores.mysql import MySqlStore
from conftest import mysql_admin, mysql_store_of, spec

P = Payload.of({"order": 7})
#: the session's clock stopped at one instant: a statement run twice writes
#: the same times, and only the version column tells "changed" from "matched"
STOPPED_CLOCK = "SET timestamp = 1900000000.123456"

MODES = [("pymysql", False), ("pymysql", True), ("mysqlclient", False), ("mysqlclient", True)]


def run(conn, sql, args=None):
    cur = conn.cursor()
    cur.execute(sql, args)
    rows = cur.fetchall() if cur.description else ()
    n = cur.rowcount
    cur.close()
    return n, rows


@pytest.mark.parametrize("driver,found_rows", MODES, ids=[f"{d}-{'found' if f else 'changed'}" for d, f in MODES])
def test_deciding_statements_count_the_same_with_and_without_found_rows(mysql_database, driver, found_rows):
    store = mysql_store_of(mysql_database, driver, found_rows)
    claim = store.claim("mail", "k", "w1", P, 30_000)
    assert claim.token == 1
    conn = store._conn()
    run(conn, STOPPED_CLOCK)
    # The control: an UPDATE that matches the row and writes what it holds
    # counts 1 with CLIENT_FOUND_ROWS, 0 without. The modes really differ here.
    n, _ = run(conn, "UPDATE onceonly_ops SET lease_until = lease_until WHERE op_key = 'k'")
    assert n == (1 if found_rows else 0)
    # A heartbeat twice in the same instant writes the same lease both times:
    # only `version = version + 1` makes the second count 1 without found rows.
    first = store.heartbeat("mail", "k", 1, 30_000)
    second = store.heartbeat("mail", "k", 1, 30_000)
    assert first is not None and second == first, "a renewal in the same millisecond is still ours"
    assert store.request_cancel("mail", "k", 1) is True
    assert store.request_cancel("mail", "k", 1) is True, "a second cancel request counts 1, as on the other databases"
    # A fenced move counts 1 once and 0 after, in either mode.
    p = OpMove("mail", "k", 1, State.CLAIMED, State.HELD, error="x")
    assert store.move(p) is True and store.move(p) is False
    # The claim of a queued row (claim_update.sql), then the same claim again.
    assert store.enqueue("mail", "q", P) is True and store.enqueue("mail", "q", P) is False
    assert store.claim("mail", "q", "w1", P, 30_000).token == 1
    assert isinstance(store.claim("mail", "q", "w2", P, 30_000), onceonly.Snapshot)
    # A take-over of a stale claim, then the same one again.
    store.clock_offset_ms += 31_000
    run(store._conn(), STOPPED_CLOCK)
    assert store.take_over("mail", "q", 1, State.CLAIMED, "w3", 30_000, "r").token == 2
    assert store.take_over("mail", "q", 1, State.CLAIMED, "w4", 30_000, "r") is None
    store.close()


def test_case_and_trailing_spaces_make_three_operations(mysql_store):
    for key in ("k", "K", "k "):
        claim = mysql_store.claim("mail", key, "w", P, 30_000)
        assert isinstance(claim, onceonly.Claim) and claim.token == 1, key
    assert sorted(r for r in ("k", "K", "k ") if mysql_store.get("mail", r)) == ["K", "k", "k "]
    # The control: the server's default collation would have made them one key.
    admin = mysql_admin()
    _, rows = run(admin, "SELECT 'k' = 'K', 'k' = 'k '")
    assert rows[0] == (1, 1)
    admin.close()


def test_tables_with_a_folding_collation_are_refused(mysql_store):
    run(mysql_store._conn(), "ALTER TABLE onceonly_ops MODIFY op_key VARCHAR(512) "
                             "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
    with pytest.raises(onceonly.InvalidInput, match=r"onceonly_ops.op_key is utf8mb4_general_ci: `k`, `K` and `k ` "
                                                    r"would be one operation"):
        mysql_store.migrate()


def test_a_key_too_long_for_its_column_is_refused_not_cut(mysql_store):
    long_key = "x" * 513
    with pytest.raises(onceonly.InvalidInput, match=r"refused by MySQL, nothing written: \(1406\).*op_key"):
        mysql_store.claim("mail", long_key, "w", P, 30_000)
    assert mysql_store.get("mail", long_key[:512]) is None
    # The control: a session without strict mode cuts the same value silently.
    conn = mysql_store.connect_raw()
    run(conn, "SET SESSION sql_mode = ''")
    run(conn, "INSERT INTO onceonly_ops (job_type, op_key, state, fingerprint, created_at, updated_at) "
              "VALUES ('mail', %s, 'queued', 'f', 0, 0)", (long_key,))
    conn.close()
    assert mysql_store.get("mail", long_key[:512]) is not None, "non-strict MySQL cut the key to 512"


def test_every_own_connection_is_strict_and_reads_the_clock_in_utc(mysql_store):
    _, rows = run(mysql_store._conn(), "SELECT @@SESSION.sql_mode, @@SESSION.time_zone")
    assert "STRICT_ALL_TABLES" in rows[0][0].split(",") and rows[0][1] == "+00:00"
    assert abs(mysql_store.now() - time.time() * 1000) < 5_000


def test_a_users_connection_that_is_not_strict_is_refused_before_anything_runs(mysql_store):
    from onceonly.stores.mysql import _module

    user = _module("pymysql").connect(**mysql_store.connect_args, charset="utf8mb4")
    run(user, "SET SESSION sql_mode = ''")
    g = Guard(mysql_store, spec("ship", effect="local"))
    with pytest.raises(onceonly.InvalidInput, match="is not strict: MySQL would cut a value"):
        g.run_local(user, "o-1", P, lambda c, ctx: None)
    assert mysql_store.get("ship", "o-1") is None
    user.close()


@pytest.mark.parametrize("url,match", [
    ("mysql://root@127.0.0.1:3306/", "names no database"),
    ("mysql://root@127.0.0.1:3306", "names no database"),
    ("mysql://root@127.0.0.1/db?ssl-mode=REQUIRED", "option 'ssl-mode' is not one this client reads"),
    ("mysql://root@127.0.0.1:notaport/db", "bad port"),
])
def test_urls_that_cannot_be_opened_as_asked_are_refused(url, match):
    with pytest.raises(onceonly.InvalidInput, match=match):
        onceonly.connect(url)


def test_a_mariadb_url_opens_the_same_store(mysql_database):
    store = onceonly.connect(mysql_database.replace("mysql://", "mariadb://", 1))
    assert isinstance(store, MySqlStore)
    store.migrate()
    assert Guard(store, spec()).run("k", P, lambda ctx: onceonly.Sent("r", 1)) == Done(1, "r")
    assert onceonly.connect(mysql_database).get("mail", "k").record.state is State.COMPLETED


def test_an_unreachable_server_is_reported_with_the_password_redacted():
    store = onceonly.connect("mariadb://u:secret@127.0.0.1:1/x")
    assert isinstance(store, MySqlStore)
    with pytest.raises(onceonly.Unreachable, match=r"mariadb://u:\*\*\*@127.0.0.1:1/x unreachable"):
        store.migrate()


def test_a_lock_wait_timeout_is_run_again_and_decides_by_its_own_count(mysql_store):
    claim = mysql_store.claim("mail", "k", "w1", P, 30_000)
    run(mysql_store._conn(), "SET SESSION innodb_lock_wait_timeout = 1")
    holder = mysql_store.connect_raw(autocommit=False)
    run(holder, "SELECT * FROM onceonly_ops WHERE op_key = 'k' FOR UPDATE")  # another session holds the row

    def release_after_a_retry():
        deadline = time.monotonic() + 30
        while mysql_store.lock_retries == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        holder.rollback()

    releaser = threading.Thread(target=release_after_a_retry)
    releaser.start()
    try:
        p = OpMove("mail", "k", claim.token, State.CLAIMED, State.COMPLETED, result="1")
        assert mysql_store.move(p) is True, "the retried completion ran from its first statement and won"
    finally:
        releaser.join()
        holder.close()
    assert mysql_store.lock_retries >= 1
    assert mysql_store.get("mail", "k").record.state is State.COMPLETED


def test_the_bind_order_covers_every_placeholder():
    for name, order in mysql.BINDS.items():
        assert mysql.count_binds(name) == len(order), name


def test_placeholders_leave_quoted_text_and_comments_alone():
    assert mysql.placeholders("-- a ? here\nSELECT '?', \"%\", ? + 1 % 2") == "SELECT '?', \"%%\", %s + 1 %% 2"


@pytest.mark.parametrize("user_driver", ["pymysql", "mysqlclient"])
def test_workers_racing_on_one_key_in_their_own_transactions_act_once(mysql_store, user_driver):
    from onceonly.stores.mysql import _module

    setup = mysql_store.connect_raw()
    run(setup, "CREATE TABLE shipments (order_key VARCHAR(64)) ENGINE = InnoDB")
    setup.close()
    g = Guard(mysql_store, spec("ship", effect="local"))
    outcomes, errors, start = [], [], threading.Barrier(6)

    def worker():
        conn = _module(user_driver).connect(**mysql_store.connect_args, charset="utf8mb4")
        try:
            start.wait()

            def effect(c, ctx):
                run(c, "INSERT INTO shipments (order_key) VALUES (%s)", (ctx.op_key,))
                time.sleep(0.2)  # the others meet the uncommitted claim meanwhile
                return 1

            outcomes.append(g.run_local(conn, "o-1", P, effect))
        except Exception as e:  # pragma: no cover - the assertion below shows it
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(1 for o in outcomes if isinstance(o, Done) and not o.repeat) == 1
    assert all(isinstance(o, (Done, InProgress)) for o in outcomes)
    check = mysql_store.connect_raw()
    assert run(check, "SELECT count(*) FROM shipments")[1][0][0] == 1
    check.close()


def test_inside_the_users_open_transaction_the_users_rollback_undoes_the_claim(mysql_store):
    from onceonly.stores.mysql import _module

    setup = mysql_store.connect_raw()
    run(setup, "CREATE TABLE shipments (order_key VARCHAR(64)) ENGINE = InnoDB")
    setup.close()
    user = _module("mysqlclient").connect(**mysql_store.connect_args, charset="utf8mb4")
    run(user, "INSERT INTO shipments (order_key) VALUES ('before')")  # the user's own open transaction
    g = Guard(mysql_store, spec("ship", effect="local"))
    out = g.run_local(user, "o-5", P, lambda c, ctx: run(c, "INSERT INTO shipments VALUES (%s)", (ctx.op_key,)) and 1)
    assert isinstance(out, Done)
    user.rollback()
    assert mysql_store.get("ship", "o-5") is None
    assert run(user, "SELECT count(*) FROM shipments")[1][0][0] == 0
    user.close()
