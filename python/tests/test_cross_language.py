"""Python and the Rust CLI on the same database: migrations both ways, a
claim taken in Rust taken over from Python and the other way round, and
every operator command on records Python wrote."""
import json
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

import onceonly
from onceonly import Done, Guard, Held, Payload, State
from onceonly import sqlfiles
from onceonly.http import HttpDestination
from conftest import MySqlUser, spec

PAYLOAD_TEXT = '{"amount":5,"to":"a@example.com"}'
P = Payload.parse(PAYLOAD_TEXT)


def oo(cli, db, *args, check=True, timeout=60):
    out = subprocess.run([cli, "--db", db, *args], capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise AssertionError(f"onceonly {' '.join(args)} exited {out.returncode}: {out.stdout}{out.stderr}")
    return out


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


def kind_of(url):
    return "sqlite" if url.startswith("sqlite") else "mysql" if url.startswith(("mysql", "mariadb")) else "postgres"


def bookkeeping(url):
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite://"):]) as c:
            return c.execute("SELECT version, name FROM onceonly_migrations ORDER BY version").fetchall()
    if kind_of(url) == "mysql":
        user = MySqlUser(url)
        try:
            return [tuple(r) for r in user.execute("SELECT version, name FROM onceonly_migrations ORDER BY version")]
        finally:
            user.close()
    import psycopg

    with psycopg.connect(url) as c:
        return c.execute("SELECT version, name FROM onceonly.migrations ORDER BY version").fetchall()


def wait_for(predicate, what, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_python_migrates_then_rust_finds_nothing_to_do(db_url, cli):
    store = onceonly.connect(db_url)
    store.migrate()
    applied = bookkeeping(db_url)
    # Every migration the Rust store ships, as the package's copy lists them.
    kind = kind_of(db_url)
    assert [v for v, _ in applied] == [v for v, _, _ in sqlfiles.migrations(kind)]
    oo(cli, db_url, "migrate")
    assert bookkeeping(db_url) == applied
    Guard(store, spec()).run("k", P, lambda ctx: onceonly.Sent("r", 1))
    (row,) = json_lines(oo(cli, db_url, "inspect", "--json").stdout)
    assert (row["job"], row["key"], row["state"], row["token"], row["external_ref"]) == ("mail", "k", "completed", 1, "r")


def test_rust_migrates_then_python_finds_nothing_to_do(db_url, cli):
    oo(cli, db_url, "migrate")
    applied = bookkeeping(db_url)
    store = onceonly.connect(db_url)
    store.migrate()
    assert bookkeeping(db_url) == applied
    oo(cli, db_url, "enqueue", "--job", "mail", "--key", "k", "--payload", PAYLOAD_TEXT)
    # A queued row written by Rust is claimed by Python when the payload matches.
    assert Guard(store, spec()).run("k", P, lambda ctx: onceonly.Sent("r", 1)) == Done(1, "r")


def rust_claim_killed(cli, db_url, destination, effect="keyed"):
    """`onceonly run` claims the queued operation and is SIGKILLed in the middle of its POST."""
    oo(cli, db_url, "migrate")
    oo(cli, db_url, "enqueue", "--job", "mail", "--key", "k", "--payload", PAYLOAD_TEXT)
    destination.delay_before_create = 3.0
    relay = subprocess.Popen([cli, "--db", db_url, "run", "--job", "mail", "--http", destination.base_url,
                              "--effect", effect, "--lease", "20s", "--timeout", "10s", "--workers", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = onceonly.connect(db_url)
    try:
        wait_for(lambda: store.get("mail", "k").record.state is State.CLAIMED, "the Rust claim")
    finally:
        relay.send_signal(signal.SIGKILL)
        relay.wait()
    rec = store.get("mail", "k").record
    assert rec.state is State.CLAIMED and rec.token == 1 and rec.owner
    return store, rec


def test_a_rust_claim_is_taken_over_from_python_keyed(db_url, cli, destination):
    store, rust = rust_claim_killed(cli, db_url, destination)
    g = Guard(store, spec(effect="keyed"))
    dest = HttpDestination(destination.base_url)
    # Still live: left alone.
    assert isinstance(g.run("k", P, dest.send), onceonly.InProgress)
    store.clock_offset_ms = 21_000
    destination.delay_before_create = 0
    out = g.run("k", P, dest.send)
    assert isinstance(out, Done) and not out.repeat
    time.sleep(3.2)  # the killed relay's POST, still in the destination, lands too
    assert destination.effects("mail:k") == 1  # one item, the same idempotency key
    rec = store.get("mail", "k").record
    assert (rec.state, rec.token, rec.attempts) == (State.COMPLETED, 2, 2)
    history = json_lines(oo(cli, db_url, "history", "--job", "mail", "--key", "k", "--json").stdout)
    events = [e for e in history if e.get("kind") == "event"]
    assert [(e["event"], e["token"], e["actor"]) for e in events] == [("take_over", 2, g.owner)]
    assert f"stale token 1: took over a claim of {rust.owner}" in events[0]["detail"]


def test_a_rust_claim_past_its_lease_is_looked_up_first_from_python(db_url, cli):
    """`onceonly run --effect lookup` created the item, then died before completing:
    Python's take-over finds it by key and completes with it, sending nothing."""
    from onceonly.testing.destination import Destination

    dest = Destination("lookup").start()
    try:
        oo(cli, db_url, "migrate")
        oo(cli, db_url, "enqueue", "--job", "mail", "--key", "k", "--payload", PAYLOAD_TEXT)
        dest.delay_after_create = 5.0  # the item exists; the answer never reaches the relay
        relay = subprocess.Popen([cli, "--db", db_url, "run", "--job", "mail", "--http", dest.base_url,
                                  "--effect", "lookup", "--lease", "20s", "--timeout", "10s", "--workers", "1"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: dest.effects("mail:k") == 1, "the relay's POST to create the item")
        finally:
            relay.send_signal(signal.SIGKILL)
            relay.wait()
        store = onceonly.connect(db_url)
        store.clock_offset_ms = 21_000
        http = HttpDestination(dest.base_url)
        out = Guard(store, spec(effect="lookup")).run("k", P, http.send, lookup=http.lookup)
        assert out == Done({"id": "item-1"}, "item-1", repeat=False)
        assert dest.effects("mail:k") == 1
        rec = store.get("mail", "k").record
        assert (rec.state, rec.token, rec.external_ref) == (State.COMPLETED, 2, "item-1")
    finally:
        dest.stop()


def test_a_rust_claim_is_held_from_python_and_resolved_by_the_cli(db_url, cli, destination):
    store, rust = rust_claim_killed(cli, db_url, destination, effect="opaque")
    store.clock_offset_ms = 21_000
    sent = []
    out = Guard(store, spec(effect="opaque", on_stale="hold")).run("k", P, lambda ctx: sent.append(1))
    assert isinstance(out, Held) and not sent
    (held,) = json_lines(oo(cli, db_url, "held", "--json").stdout)
    assert (held["key"], held["state"], held["token"]) == ("k", "held", 2)
    oo(cli, db_url, "resolve", "--job", "mail", "--key", "k", "--as", "completed", "--ref", "item-1",
       "--reason", "found it at the provider", "--token", "2")
    assert Guard(store, spec(effect="opaque")).run("k", P, lambda ctx: sent.append(1)) == Done(None, "item-1", True)


@pytest.mark.parametrize("effect", ["keyed", "opaque"])
def test_a_python_claim_is_taken_over_by_the_rust_relay(db_url, cli, destination, effect):
    store = onceonly.connect(db_url)
    store.migrate()
    crashing = Guard(store, spec(effect=effect, lease="1s", timeout="500ms"),
                     fault_hook=lambda point: "crash" if point == "after_claim" else None)
    with pytest.raises(onceonly.InjectedCrash):
        crashing.run("k", P, HttpDestination(destination.base_url).send)
    # The CLI reads the clock unshifted: the 1s lease must pass for real.
    stuck = wait_for(lambda: json_lines(oo(cli, db_url, "stuck", "--json").stdout), "the claim to be stuck", 5)
    assert stuck[0]["owner"] == crashing.owner and stuck[0]["token"] == 1
    oo(cli, db_url, "run", "--job", "mail", "--http", destination.base_url, "--effect", effect,
       "--lease", "5s", "--timeout", "2s", "--drain", timeout=60)
    rec = store.get("mail", "k").record
    if effect == "opaque":  # hold: nobody can tell whether Python's effect happened
        assert (rec.state, rec.token) == (State.HELD, 2) and destination.effects("mail:k") == 0
        assert store.history("mail", "k")[0].event == "take_over"
        return
    assert (rec.state, rec.token, rec.attempts) == (State.COMPLETED, 2, 2)
    assert destination.effects("mail:k") == 1
    (event,) = store.history("mail", "k")
    assert (event.event, event.token) == ("take_over", 2) and crashing.owner in event.detail
    # And a Python repeat gets what Rust stored.
    assert Guard(store, spec()).run("k", P, lambda ctx: 1/0).external_ref == rec.external_ref


def test_cli_cancel_stops_a_python_worker_through_its_heartbeat(db_url, cli):
    store = onceonly.connect(db_url)
    store.migrate()
    g = Guard(store, spec(effect="keyed", lease="3s", timeout="20s", heartbeat="200ms"))
    started, outcome = threading.Event(), []

    def effect(ctx):
        started.set()
        wait_for(ctx.cancel_requested, "the cancel request", 15)
        raise onceonly.NotSent("stopped before sending: cancel requested")

    worker = threading.Thread(target=lambda: outcome.append(g.run("k", P, effect)))
    worker.start()
    started.wait(10)
    out = oo(cli, db_url, "cancel", "--job", "mail", "--key", "k", "--wait", "15s", check=False)
    worker.join(20)
    assert out.returncode == 0, out.stdout + out.stderr
    assert outcome == [onceonly.Cancelled(None)]
    assert store.get("mail", "k").record.state is State.CANCELLED
    events = [e["event"] for e in json_lines(oo(cli, db_url, "history", "--job", "mail", "--key", "k", "--json").stdout)
              if e.get("kind") == "event"]
    assert events == ["cancel_requested", "cancelled"]


def test_cli_cancel_withdraws_a_completed_python_operation(db_url, cli, destination):
    store = onceonly.connect(db_url)
    store.migrate()
    dest = HttpDestination(destination.base_url)
    Guard(store, spec()).run("k", P, dest.send)
    assert destination.live("mail:k") == 1
    oo(cli, db_url, "cancel", "--job", "mail", "--key", "k", "--http", destination.base_url)
    assert destination.live("mail:k") == 0
    assert store.get("mail", "k").record.state is State.CANCELLED


def test_cli_inspect_and_check_read_python_records(db_url, cli, tmp_path):
    store = onceonly.connect(db_url)
    store.migrate()
    g = Guard(store, spec("slow", effect="keyed"))

    def took(seconds):
        def effect(ctx):
            store.clock_offset_ms += seconds * 1000  # the database's clock moves, nothing sleeps
            return onceonly.Sent(f"ref-{ctx.op_key}")
        return effect

    for key, seconds in [("a", 1), ("the-slow-one", 7), ("b", 1)]:
        g.run(key, P, took(seconds))
    rows = json_lines(oo(cli, db_url, "inspect", "--job", "slow", "--json").stdout)
    assert {r["key"]: (r["state"], r["external_ref"]) for r in rows} == {
        k: ("completed", f"ref-{k}") for k in ("a", "the-slow-one", "b")}
    for field in ("token", "attempts", "owner", "error", "cancel_requested", "claimed_at", "lease_until", "updated_at"):
        assert field in rows[0]
    config = tmp_path / "onceonly.toml"
    config.write_text('[jobs.slow]\neffect = "keyed"\nlease = "30s"\ntimeout = "10s"\n')
    said = oo(cli, db_url, "check", "--config", str(config)).stdout
    assert 'the longest claim-to-completion time (7s' in said and 'key "the-slow-one", of 3 completed' in said, said


def test_cli_repeats_reads_a_table_python_guarded(db_url, cli):
    """A naive worker's table shows the repeat; the guarded one does not."""
    store = onceonly.connect(db_url)
    store.migrate()
    if db_url.startswith("sqlite"):
        conn = user = sqlite3.connect(db_url[len("sqlite://"):])
    elif kind_of(db_url) == "mysql":
        user = MySqlUser(db_url)
        conn = user.raw
    else:
        import psycopg

        conn = user = psycopg.connect(db_url)
    ph = "?" if db_url.startswith("sqlite") else "%s"
    for table in ("naive_sends", "guarded_sends"):
        user.execute(f"CREATE TABLE {table} (order_key TEXT, sent_at BIGINT)")
    user.commit()
    g = Guard(store, spec("ship", effect="local"))
    for delivery in range(3):  # the same message three times
        user.execute(f"INSERT INTO naive_sends VALUES ({ph}, {ph})", ("o-1", 1_793_606_400 + delivery * 10))
        user.commit()
        def send(c, ctx, at=1_793_606_400 + delivery * 10):
            user.execute(f"INSERT INTO guarded_sends VALUES ({ph}, {ph})", (ctx.op_key, at))

        g.run_local(conn, "o-1", P, send)
    naive = json_lines(oo(cli, db_url, "repeats", "--table", "naive_sends", "--key", "order_key", "--at", "sent_at",
                          "--json").stdout)
    guarded = json_lines(oo(cli, db_url, "repeats", "--table", "guarded_sends", "--key", "order_key", "--at", "sent_at", "--json").stdout)
    assert [(r["key"], r["count"]) for r in naive] == [("o-1", 3)]
    assert guarded == []
    user.close()


def test_a_retry_written_by_python_is_in_the_rust_history(db_url, cli):
    """Python releases a claim twice for a retry, then completes: the Rust CLI's
    `history` shows both retries with their attempt, reason and backoff."""
    oo(cli, db_url, "migrate")
    store = onceonly.connect(db_url)
    g = Guard(store, spec(effect="keyed", max_retries=0))

    def not_sent(why):
        def perform(ctx):
            raise onceonly.NotSent(why)
        return perform

    assert isinstance(g.run("k", P, not_sent("connection refused")), onceonly.RetryLater)
    store.clock_offset_ms += 501
    assert isinstance(g.run("k", P, not_sent("503 from the destination")), onceonly.RetryLater)
    store.clock_offset_ms += 1001
    assert isinstance(g.run("k", P, lambda ctx: onceonly.Sent("r", 1)), Done)
    rows = json_lines(oo(cli, db_url, "history", "--job", "mail", "--key", "k", "--json").stdout)
    assert (rows[0]["kind"], rows[0]["state"], rows[0]["attempts"]) == ("record", "completed", 3)
    assert [(e["event"], e["actor"], e["token"], e["attempt"], e["detail"], e["retry_after_ms"])
            for e in rows[1:]] == [
        ("retry", g.owner, 1, 1, "connection refused", 500),
        ("retry", g.owner, 2, 2, "503 from the destination", 1000),
    ]
    table = oo(cli, db_url, "history", "--job", "mail", "--key", "k").stdout
    assert "attempt 2: 503 from the destination (due again at " in table, table
