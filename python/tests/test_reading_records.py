"""Reading records from Python without the CLI, on the stores' own statements
(get, held, stuck, history), on SQLite and PostgreSQL; and the same records
as the Rust CLI lists them (held --json, stuck --json, inspect, history)."""
import signal
import subprocess

import pytest

import onceonly
from onceonly import Guard, Payload, State
from conftest import spec
from test_cross_language import json_lines, oo, wait_for

P = Payload.of({"to": "a@example.com"})


def held_and_stuck(store):
    """A completed, a held, a stuck and a queued operation; the clock ends 40s on."""
    Guard(store, spec("mail", effect="keyed")).run("done-1", P, lambda ctx: onceonly.Sent("ref-1", {"id": 1}))
    for key in ("stuck-old", "held-1", "stuck-new"):
        store.claim("charge", key, "dead-worker:1:0", P, 30_000)
        store.clock_offset_ms += 10_000
    store.clock_offset_ms += 30_000  # stuck-old's lease ran out 30s ago, held-1's 20s ago, stuck-new's 10s ago
    opaque = Guard(store, spec("charge", effect="opaque", on_stale="hold"))
    assert isinstance(opaque.run("held-1", P, lambda ctx: "never"), onceonly.Held)
    store.enqueue("mail", "queued-1", P)


def test_get_reads_state_attempts_reference_result_and_error(store):
    held_and_stuck(store)
    done = store.get("mail", "done-1").record
    assert (done.state, done.attempts, done.external_ref, done.result_value(), done.error) == (
        State.COMPLETED, 1, "ref-1", {"id": 1}, None)
    held = store.get("charge", "held-1").record
    assert (held.state, held.attempts, held.external_ref) == (State.HELD, 1, None)
    assert "went past its lease; the effect may or may not have happened" in held.error
    assert store.get("charge", "no-such-key") is None


def test_held_and_stuck_list_as_the_cli_does_oldest_first(store):
    held_and_stuck(store)
    assert [(r.job_type, r.op_key, r.state) for r in store.held()] == [("charge", "held-1", State.HELD)]
    assert store.held(job="mail") == []
    assert [r.op_key for r in store.stuck()] == ["stuck-old", "stuck-new"]
    assert [r.op_key for r in store.stuck(job="charge", older_than="20s")] == ["stuck-old"]
    assert [r.op_key for r in store.stuck(older_than=10)] == ["stuck-old", "stuck-new"]
    assert store.stuck(job="mail") == []
    with pytest.raises(onceonly.InvalidInput, match="older_than 'soon' is not a duration"):
        store.stuck(older_than="soon")


def test_history_reads_the_audit_trail_oldest_first(store):
    held_and_stuck(store)
    (event,) = store.history("charge", "held-1")
    assert (event.event, event.from_state, event.to_state, event.actor.count(":")) == ("take_over", "claimed", "held", 2)
    assert store.history("mail", "done-1") == []


def test_python_reads_what_the_rust_cli_wrote(db_url, cli, destination):
    """`onceonly run` completes one operation and is SIGKILLed mid-POST on
    another (a stuck claim), then `onceonly run --drain --effect opaque`
    holds a third's stale claim: Python's get, stuck, held and history
    show what `onceonly inspect`, `stuck`, `held` and `history` show."""
    oo(cli, db_url, "migrate")
    oo(cli, db_url, "enqueue", "--job", "mail", "--key", "done-1", "--payload", '{"n":1}')
    oo(cli, db_url, "run", "--job", "mail", "--http", destination.base_url, "--effect", "keyed", "--drain")
    store = onceonly.connect(db_url)
    for key in ("stuck-1", "held-1"):
        oo(cli, db_url, "enqueue", "--job", "charge", "--key", key, "--payload", '{"n":2}')
    destination.delay_before_create = 30.0
    relay = subprocess.Popen([cli, "--db", db_url, "run", "--job", "charge", "--http", destination.base_url,
                              "--effect", "opaque", "--lease", "2s", "--timeout", "1s", "--workers", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: all(store.get("charge", k).record.state is State.CLAIMED for k in ("stuck-1", "held-1")),
                 "both Rust claims")
    finally:
        relay.send_signal(signal.SIGKILL)
        relay.wait()
    wait_for(lambda: len(store.stuck()) == 2, "both leases to run out")
    # Settle one of them as the relay would (opaque/hold: held).
    store.clock_offset_ms = 0
    assert isinstance(Guard(store, spec("charge", effect="opaque", lease="2s", timeout="1s")).run(
        "held-1", Payload.parse('{"n":2}'), lambda ctx: "never"), onceonly.Held)

    (inspected,) = json_lines(oo(cli, db_url, "inspect", "--job", "mail", "--json").stdout)
    done = store.get("mail", "done-1").record
    assert (done.state.value, done.attempts, done.external_ref, done.error, done.token) == (
        inspected["state"], inspected["attempts"], inspected["external_ref"], inspected["error"], inspected["token"])
    assert done.state is State.COMPLETED and done.external_ref

    def listed(rows):
        return [(r["job"], r["key"], r["state"], r["token"], r["attempts"], r["owner"], r["error"]) for r in rows]

    def ours(records):
        return [(r.job_type, r.op_key, r.state.value, r.token, r.attempts, r.owner, r.error) for r in records]

    assert ours(store.stuck()) == listed(json_lines(oo(cli, db_url, "stuck", "--json").stdout))
    assert [r.op_key for r in store.stuck()] == ["stuck-1"]
    assert ours(store.held()) == listed(json_lines(oo(cli, db_url, "held", "--json").stdout))
    assert [r.op_key for r in store.held()] == ["held-1"]
    record, *events = json_lines(oo(cli, db_url, "history", "--job", "charge", "--key", "held-1", "--json").stdout)
    held = store.get("charge", "held-1").record
    assert (record["kind"], record["state"], record["token"], record["error"]) == ("record", "held", held.token, held.error)
    assert [(e.event, e.actor, e.token, e.from_state, e.to_state, e.detail) for e in store.history("charge", "held-1")] == [
        (e["event"], e["actor"], e["token"], e["from_state"], e["to_state"], e["detail"]) for e in events]
    assert [e["event"] for e in events] == ["take_over"]
