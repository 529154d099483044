"""Local effects: the user's row, the claim and the completion in one
transaction on the user's own connection (sqlite3, psycopg, PyMySQL,
mysqlclient, SQLAlchemy)."""
import sqlite3

import pytest

import onceonly
from onceonly import Done, Guard, LocalEffectFailed, Payload, State
from conftest import PG_URL, MySqlUser, spec

P = Payload.of({"order": 7})


def sqlite_conn(store):
    conn = sqlite3.connect(store.path, timeout=30)
    conn.execute("CREATE TABLE IF NOT EXISTS shipments (order_key TEXT, at INTEGER)")
    conn.commit()
    return conn, "INSERT INTO shipments (order_key, at) VALUES (?, 1)"


def pg_conn(store):
    import psycopg

    conn = psycopg.connect(PG_URL)
    conn.execute(f'CREATE TABLE "{store.schema}".shipments (order_key TEXT, at BIGINT)')
    conn.commit()
    return conn, f'INSERT INTO "{store.schema}".shipments (order_key, at) VALUES (%s, 1)'


def mysql_conn(store, driver=None):
    # The other driver than the store's own connections, by default.
    user = MySqlUser(store.url, driver or ("mysqlclient" if store.driver == "pymysql" else "pymysql"))
    user.execute("CREATE TABLE IF NOT EXISTS shipments (order_key VARCHAR(64), at BIGINT) ENGINE = InnoDB")
    user.commit()
    return user, "INSERT INTO shipments (order_key, at) VALUES (%s, 1)"


def user_conn(store):
    """(the user's connection as the guard takes it, a wrapper with execute, insert)"""
    if store.dialect == "mysql":
        user, insert = mysql_conn(store)
        return user.raw, user, insert
    conn, insert = (sqlite_conn if store.dialect == "sqlite" else pg_conn)(store)
    return conn, conn, insert


def sqlalchemy_session(store):
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    if store.dialect == "sqlite":
        engine = create_engine(f"sqlite:///{store.path}")
        table = "shipments"
    elif store.dialect == "mysql":
        engine = create_engine(store.url.replace("mysql://", "mysql+pymysql://", 1))
        table = "shipments"
    else:
        engine = create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://"))
        table = f'"{store.schema}".shipments'
    with engine.begin() as c:
        c.execute(text(f"CREATE TABLE IF NOT EXISTS {table} (order_key TEXT, at BIGINT)"))
    return Session(engine), table


@pytest.fixture(params=["driver", "sqlalchemy"])
def user_db(request, store):
    """(connection or session, write(conn, key), count())"""
    if request.param == "driver":
        conn, user, insert = user_conn(store)

        def write(c, key):
            c.cursor().execute(insert, (key,)) if store.dialect == "mysql" else c.execute(insert, (key,))

        def count():
            n = user.execute("SELECT count(*) FROM " + insert.split()[2]).fetchone()[0]
            user.commit()
            return n

        yield conn, write, count
        user.close()
    else:
        from sqlalchemy import text

        session, table = sqlalchemy_session(store)

        def write(s, key):
            s.execute(text(f"INSERT INTO {table} (order_key, at) VALUES (:k, 1)"), {"k": key})

        def count():
            with session.bind.connect() as c:
                return c.execute(text(f"SELECT count(*) FROM {table}")).scalar()

        yield session, write, count
        session.close()
        session.bind.dispose()


def test_row_and_record_commit_together_and_a_repeat_writes_nothing(store, user_db):
    conn, write, count = user_db
    g = Guard(store, spec("ship", effect="local"))

    def effect(c, ctx):
        write(c, ctx.op_key)
        return {"shipped": ctx.op_key}

    assert g.run_local(conn, "o-1", P, effect) == Done({"shipped": "o-1"}, None, repeat=False)
    assert g.run_local(conn, "o-1", P, effect) == Done({"shipped": "o-1"}, None, repeat=True)
    assert count() == 1
    rec = store.get("ship", "o-1").record
    assert (rec.state, rec.token, rec.result) == (State.COMPLETED, 1, '{"shipped":"o-1"}')


def test_a_failure_inside_leaves_neither_row_nor_record(store, user_db):
    conn, write, count = user_db
    g = Guard(store, spec("ship", effect="local"))

    def effect(c, ctx):
        write(c, ctx.op_key)
        raise ValueError("address invalid")

    with pytest.raises(LocalEffectFailed, match="rolled back: ValueError: address invalid"):
        g.run_local(conn, "o-2", P, effect)
    assert count() == 0 and store.get("ship", "o-2") is None


def test_a_crash_after_the_effect_rolls_back_and_the_redelivery_does_it_once(store, user_db):
    conn, write, count = user_db
    crashing = Guard(store, spec("ship", effect="local"), fault_hook=lambda p: "crash" if p == "after_effect" else None)

    def effect(c, ctx):
        write(c, ctx.op_key)
        return None

    with pytest.raises(onceonly.InjectedCrash):
        crashing.run_local(conn, "o-3", P, effect)
    assert count() == 0 and store.get("ship", "o-3") is None
    assert isinstance(Guard(store, crashing.spec).run_local(conn, "o-3", P, effect), Done)
    assert count() == 1


def test_a_local_job_refuses_a_connection_of_another_kind(sqlite_store):
    g = Guard(sqlite_store, spec("ship", effect="local"))
    with pytest.raises(onceonly.InvalidInput, match="needs a sqlite3, psycopg, PyMySQL or mysqlclient connection, a SQLAlchemy session"):
        g.run_local(object(), "o-4", P, lambda c, ctx: None)
    assert sqlite_store.get("ship", "o-4") is None


def test_inside_the_users_transaction_the_users_rollback_undoes_the_claim(sqlite_store):
    conn, insert = sqlite_conn(sqlite_store)
    conn.execute(insert, ("before",))  # the user's own open transaction
    g = Guard(sqlite_store, spec("ship", effect="local"))
    assert isinstance(g.run_local(conn, "o-5", P, lambda c, ctx: c.execute(insert, (ctx.op_key,)) and None), Done)
    conn.rollback()
    assert sqlite_store.get("ship", "o-5") is None
    assert conn.execute("SELECT count(*) FROM shipments").fetchone()[0] == 0


def test_a_local_completion_is_refused_while_a_cancel_is_requested(store):
    # protocol: `complete` is fenced by `cancel: not_requested` (Move::Complete
    # in the Rust local guard too): a cancel seen before the commit wins.
    from onceonly import LostClaim
    from onceonly.stores import params

    conn, user, insert = user_conn(store)
    g = Guard(store, spec("ship", effect="local"))

    def effect(c, ctx):
        args = params.request_cancel(store.clock_offset_ms, ctx.job_type, ctx.op_key, ctx.token)
        assert store._exec(store.driver_connection(c), "request_cancel", args)[0] == 1
        user.execute(insert, (ctx.op_key,))
        return {"shipped": ctx.op_key}

    with pytest.raises(LostClaim):
        g.run_local(conn, "o-9", P, effect)
    assert store.get("ship", "o-9") is None, "the claim and the effect rolled back"
    user.close()
