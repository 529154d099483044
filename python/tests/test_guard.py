"""The guard's transitions on both stores, as the Rust guard makes them."""
import threading

import pytest

import onceonly
from onceonly import (Cancelled, Done, Failed, Guard, Held, InProgress, LostClaim, NotDue, NotSent,
                      OutcomeUnknown, Payload, PayloadMismatch, PermanentFailure, RetryLater, Sent,
                      State, WithdrawFailed)
from onceonly.stores import OpMove
from conftest import spec

P = Payload.of({"to": "a@example.com", "amount": 19.99})


class Counting:
    """An effect that counts its calls and returns a reference."""

    def __init__(self, report=None):
        self.calls, self.report = 0, report
        self.lock = threading.Lock()

    def __call__(self, ctx):
        with self.lock:
            self.calls += 1
            n = self.calls
        if self.report:
            raise self.report
        return Sent(f"ref-{n}", {"n": n})


def expire(store, ms=31_000):
    store.clock_offset_ms += ms


def stale_claim(store, job, key, payload=P, lease_ms=30_000):
    """A claim of a worker that died: taken, then never written again."""
    claim = store.claim(job, key, "dead-worker:1:00000000", payload, lease_ms)
    assert isinstance(claim, onceonly.Claim)
    return claim


def test_repeat_gets_the_stored_result_without_acting(store):
    g, effect = Guard(store, spec(effect="keyed")), Counting()
    first = g.run("order-1", P, effect)
    assert first == Done({"n": 1}, "ref-1", repeat=False)
    for _ in range(2):
        assert g.run("order-1", P, effect) == Done({"n": 1}, "ref-1", repeat=True)
    assert effect.calls == 1
    rec = store.get("mail", "order-1").record
    assert (rec.state, rec.token, rec.attempts, rec.result) == (State.COMPLETED, 1, 1, '{"n":1}')
    assert rec.payload == P.json and rec.fingerprint == P.fingerprint


def test_concurrent_deliveries_one_effect(store):
    g, effect = Guard(store, spec(effect="opaque")), Counting()
    outcomes, barrier = [], threading.Barrier(8)

    def deliver():
        barrier.wait()
        outcomes.append(g.run("order-2", P, effect))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert effect.calls == 1
    assert all(isinstance(o, (Done, InProgress)) for o in outcomes), outcomes
    assert sum(isinstance(o, Done) and not o.repeat for o in outcomes) == 1


def test_same_key_other_payload_is_refused_and_nothing_changes(store):
    g = Guard(store, spec())
    g.run("order-3", P, Counting())
    before = store.get("mail", "order-3").record
    with pytest.raises(PayloadMismatch, match="exists with another payload"):
        g.run("order-3", Payload.of({"to": "b@example.com"}), Counting())
    assert store.get("mail", "order-3").record == before


def test_a_young_claim_is_left_alone(store):
    stale_claim(store, "mail", "k")
    effect = Counting()
    out = Guard(store, spec(effect="keyed")).run("k", P, effect)
    assert isinstance(out, InProgress) and out.owner == "dead-worker:1:00000000"
    assert out.lease_ms == 30_000 and effect.calls == 0


def test_keyed_redoes_a_stale_claim_with_a_new_token(store):
    stale_claim(store, "mail", "k")
    expire(store)
    g, effect = Guard(store, spec(effect="keyed")), Counting()
    assert isinstance(g.run("k", P, effect), Done)
    rec = store.get("mail", "k").record
    assert (rec.state, rec.token, rec.attempts) == (State.COMPLETED, 2, 2)
    events = store.history("mail", "k")
    assert [(e.event, e.token, e.from_state, e.to_state, e.actor) for e in events] == [
        ("take_over", 2, "claimed", "claimed", g.owner)]
    assert events[0].detail.startswith("stale token 1: took over a claim of dead-worker:1:00000000")


def test_lookup_looks_first_after_a_stale_claim(store):
    stale_claim(store, "mail", "k")
    expire(store)
    effect, looked = Counting(), []

    def lookup(ctx):
        looked.append(ctx.idempotency_key)
        return Sent("found-1", {"found": True})

    out = Guard(store, spec(effect="lookup")).run("k", P, effect, lookup=lookup)
    assert out == Done({"found": True}, "found-1", repeat=False)
    assert looked == ["mail:k"] and effect.calls == 0


def test_a_lookup_that_finds_a_plain_value_completes_with_it(store):
    # As a perform's plain return value (and Ruby's lookup): the value found is
    # the result. It must not break the recording and leave the claim unwritten.
    stale_claim(store, "mail", "k")
    expire(store)
    out = Guard(store, spec(effect="lookup")).run("k", P, Counting(), lookup=lambda ctx: {"id": "found-1"})
    assert out == Done({"id": "found-1"}, None, repeat=False)
    assert store.get("mail", "k").record.state is State.COMPLETED


def test_lookup_not_found_sends(store):
    stale_claim(store, "mail", "k")
    expire(store)
    effect = Counting()
    out = Guard(store, spec(effect="lookup")).run("k", P, effect, lookup=lambda ctx: None)
    assert isinstance(out, Done) and effect.calls == 1


@pytest.mark.parametrize("policy, state, outcome", [
    ("hold", State.HELD, Held), ("at-most-once", State.FAILED, Failed)])
def test_opaque_stale_claim_follows_the_policy_without_acting(store, policy, state, outcome):
    stale_claim(store, "mail", "k")
    expire(store)
    effect = Counting()
    out = Guard(store, spec(effect="opaque", on_stale=policy)).run("k", P, effect)
    assert isinstance(out, outcome) and effect.calls == 0
    rec = store.get("mail", "k").record
    assert (rec.state, rec.token, rec.lease_until) == (state, 2, None)
    assert [e.event for e in store.history("mail", "k")] == ["take_over"]


@pytest.mark.parametrize("policy, state", [("hold", State.HELD), ("at-most-once", State.FAILED)])
def test_a_spec_built_directly_with_names_keeps_its_policy(store, policy, state):
    # JobSpec("mail", "opaque", "hold") is a dataclass call: its kind and policy
    # as plain names must mean what they say, not fall through to a redo.
    stale_claim(store, "mail", "k")
    expire(store)
    effect = Counting()
    Guard(store, onceonly.JobSpec("mail", "opaque", policy)).run("k", P, effect)
    assert effect.calls == 0 and store.get("mail", "k").record.state is state


def test_at_least_once_redoes_once_then_holds(store):
    stale_claim(store, "mail", "k")
    expire(store)
    g = Guard(store, spec(effect="opaque", on_stale="at-least-once"))
    crashed = Guard(store, g.spec, fault_hook=lambda point: "crash" if point == "after_claim" else None)
    with pytest.raises(onceonly.InjectedCrash):
        crashed.run("k", P, Counting())  # the redo dies too
    expire(store)
    effect = Counting()
    out = g.run("k", P, effect)
    assert isinstance(out, Held) and "one extra" in out.reason and effect.calls == 0


def test_two_workers_racing_for_a_stale_claim_one_wins(store):
    claim = stale_claim(store, "mail", "k")
    expire(store)
    won = store.take_over("mail", "k", claim.token, State.CLAIMED, "a", 30_000, "r")
    lost = store.take_over("mail", "k", claim.token, State.CLAIMED, "b", 30_000, "r")
    assert won is not None and won.token == 2 and lost is None


def test_a_failure_write_never_touches_a_success(store):
    g = Guard(store, spec())
    g.run("k", P, Counting())
    late = OpMove("mail", "k", 1, State.CLAIMED, State.FAILED, error="late failure")
    assert store.move(late) is False
    assert store.get("mail", "k").record.state is State.COMPLETED


def test_a_worker_whose_claim_was_taken_over_cannot_complete(store):
    g = Guard(store, spec(effect="keyed"))

    def slow_effect(ctx):
        expire(store)  # meanwhile the lease ran out and another worker took over
        other = store.take_over("mail", "k", ctx.token, State.CLAIMED, "other", 30_000, "r")
        assert other is not None
        return Sent("ref-x", None)

    with pytest.raises(LostClaim, match="held token 1.*now claimed with token 2"):
        g.run("k", P, slow_effect)
    rec = store.get("mail", "k").record
    assert (rec.state, rec.owner, rec.external_ref) == (State.CLAIMED, "other", None)
    assert [e.event for e in store.history("mail", "k")] == ["lost_claim"]


def test_a_done_effect_whose_result_is_not_json_is_still_recorded_completed(store):
    # Rust always records a done effect (its result is a JSON value). Here the
    # effect happened: a result that cannot be stored must not leave the claim
    # unwritten for the stale-claim policy to hold or redo. The machine's
    # done answer carries it as `unstored`: the result stored is JSON's null,
    # the error says why.
    import datetime

    out = Guard(store, spec()).run("k", P, lambda ctx: Sent("item-1", datetime.datetime(2026, 1, 1)))
    assert out == Done(None, "item-1", repeat=False)
    rec = store.get("mail", "k").record
    assert (rec.state, rec.external_ref, rec.result) == (State.COMPLETED, "item-1", "null")
    assert "not stored" in rec.error and "datetime" in rec.error
    assert Guard(store, spec()).run("k", P, Counting()) == Done(None, "item-1", repeat=True)


def test_not_sent_releases_the_claim_for_later(store):
    g = Guard(store, spec(effect="opaque"))
    out = g.run("k", P, Counting(NotSent("connection refused")))
    assert isinstance(out, RetryLater) and out.retry_after_ms == 500
    rec = store.get("mail", "k").record
    assert rec.state is State.QUEUED and rec.error == "connection refused"
    assert isinstance(g.run("k", P, Counting()), NotDue)
    expire(store, 600)
    assert isinstance(g.run("k", P, Counting()), Done)
    assert store.get("mail", "k").record.attempts == 2


def test_each_release_for_a_retry_is_in_the_history(store):
    """Fails twice (not sent, then unknown under keyed), then succeeds: two
    `retry` events with the attempt, reason and backoff, then nothing for the
    completion, as the Rust guard appends them."""
    g = Guard(store, spec(effect="keyed", max_retries=0))
    assert isinstance(g.run("k", P, Counting(NotSent("connection refused"))), RetryLater)
    expire(store, 501)
    assert isinstance(g.run("k", P, Counting(OutcomeUnknown("read timed out"))), RetryLater)
    expire(store, 1001)
    assert isinstance(g.run("k", P, Counting()), Done)
    assert [(e.event, e.actor, e.token, e.attempt, e.detail, e.retry_after_ms, e.from_state, e.to_state)
            for e in store.history("mail", "k")] == [
        ("retry", g.owner, 1, 1, "connection refused", 500, "claimed", "queued"),
        ("retry", g.owner, 2, 2, "read timed out", 1000, "claimed", "queued"),
    ]


def test_a_release_refused_for_a_cancel_is_not_a_retry(store):
    """A cancel requested while the effect ran: the release is refused, the
    claim cancelled; no `retry` is appended for a write that did not happen."""
    g = Guard(store, spec(effect="keyed", max_retries=0))

    def cancelled_meanwhile(ctx):
        assert store.request_cancel("mail", "k", ctx.token)
        raise NotSent("connection refused")

    assert isinstance(g.run("k", P, cancelled_meanwhile), onceonly.Cancelled)
    assert [e.event for e in store.history("mail", "k")] == ["cancelled"]


def test_an_unknown_event_name_is_read_not_refused(store):
    """A newer client may append an event this one does not know: history reads it as stored."""
    store.audit("mail", "k", "a_future_event", "someone", 1, None, None, "from a newer client")
    (e,) = store.history("mail", "k")
    assert (e.event, e.detail, e.attempt, e.retry_after_ms) == ("a_future_event", "from a newer client", None, None)


def test_unknown_is_retried_under_the_claim_for_keyed_then_released(store):
    effect = Counting(OutcomeUnknown("timeout"))
    out = Guard(store, spec(effect="keyed")).run("k", P, effect)
    assert isinstance(out, RetryLater) and effect.calls == 4  # 1 + max_retries
    assert store.get("mail", "k").record.state is State.QUEUED


def test_no_retry_under_the_claim_starts_after_the_job_timeout(store):
    # Rust bounds the retries by the job timeout (< lease): a retry after it
    # could run while another worker, past the lease, takes the claim over.
    import time

    class Slow(Counting):
        def __call__(self, ctx):
            time.sleep(0.2)
            return super().__call__(ctx)

    effect = Slow(NotSent("connection refused"))
    out = Guard(store, spec(effect="keyed", lease="1s", timeout="300ms")).run("k", P, effect)
    assert isinstance(out, RetryLater) and effect.calls <= 2
    assert store.get("mail", "k").record.state is State.QUEUED


@pytest.mark.parametrize("policy, state", [("hold", State.HELD), ("at-most-once", State.FAILED)])
def test_unknown_opaque_follows_the_policy_at_once(store, policy, state):
    effect = Counting(OutcomeUnknown("reset after write"))
    Guard(store, spec(effect="opaque", on_stale=policy)).run("k", P, effect)
    rec = store.get("mail", "k").record
    assert effect.calls == 1 and rec.state is state and rec.error == "reset after write"
    assert [e.event for e in store.history("mail", "k")] == ["hold" if state is State.HELD else "failed"]


def test_permanent_failure_is_failed_and_audited(store):
    out = Guard(store, spec()).run("k", P, Counting(PermanentFailure("422 unprocessable")))
    assert out == Failed("422 unprocessable")
    assert store.get("mail", "k").record.state is State.FAILED
    assert [e.event for e in store.history("mail", "k")] == ["failed"]


def test_cancel_while_sending_withdraws_at_the_destination(store):
    withdrawn = []

    def effect(ctx):
        assert store.request_cancel("mail", "k", ctx.token)
        return Sent("item-9", None)

    out = Guard(store, spec()).run("k", P, effect, withdraw=lambda ctx, ref: withdrawn.append(ref))
    assert out == Cancelled("item-9") and withdrawn == ["item-9"]
    assert store.get("mail", "k").record.state is State.CANCELLED
    assert [e.event for e in store.history("mail", "k")] == ["compensated"]


def test_a_failed_withdraw_leaves_the_operation_completed_and_says_so(store):
    def effect(ctx):
        store.request_cancel("mail", "k", ctx.token)
        return Sent("item-9", None)

    def withdraw(ctx, ref):
        raise RuntimeError("delete answered 503")

    out = Guard(store, spec()).run("k", P, effect, withdraw=withdraw)
    assert isinstance(out, WithdrawFailed) and out.external_ref == "item-9"
    rec = store.get("mail", "k").record
    assert rec.state is State.COMPLETED and "withdraw failed" in rec.error


def test_a_withdraw_that_answers_false_is_not_taken_as_withdrawn(store):
    # Rust's withdraw answers Withdrawn or NotWithdrawn (Ruby: a falsy answer is
    # not withdrawn): the record must not say cancelled while the item is live.
    def effect(ctx):
        store.request_cancel("mail", "k", ctx.token)
        return Sent("item-9", None)

    out = Guard(store, spec()).run("k", P, effect, withdraw=lambda ctx, ref: False)
    assert isinstance(out, WithdrawFailed) and out.external_ref == "item-9"
    assert store.get("mail", "k").record.state is State.COMPLETED
    assert [e.event for e in store.history("mail", "k")] == ["withdraw_failed"]


def test_heartbeat_renews_the_lease_and_carries_a_cancel_to_the_effect(store):
    import time

    g = Guard(store, spec(effect="opaque", lease="600ms", timeout="5s", heartbeat="100ms"))
    seen = {}

    def effect(ctx):
        lease0 = store.get("mail", "k").record.lease_until
        time.sleep(0.35)
        seen["renewed"] = store.get("mail", "k").record.lease_until > lease0
        store.request_cancel("mail", "k", ctx.token)
        deadline = time.monotonic() + 2
        while not ctx.cancel_requested() and time.monotonic() < deadline:
            time.sleep(0.02)
        if ctx.cancel_requested():
            raise NotSent("stopped: cancel requested")
        return Sent("r", None)

    out = g.run("k", P, effect)
    assert seen["renewed"] and isinstance(out, Cancelled)
    assert store.get("mail", "k").record.state is State.CANCELLED


def test_timing_rules_refuse_to_start_naming_both_values():
    with pytest.raises(onceonly.TimingError, match=r"job timeout \(10s\) must be shorter than the lease \(10s\)"):
        spec(lease="10s", timeout="10s")
    with pytest.raises(onceonly.TimingError, match=r"heartbeat \(11s\) must renew the lease at least every lease/3 \(10s\)"):
        spec(lease="30s", timeout="5m", heartbeat="11s")
    with pytest.raises(onceonly.TimingError, match=r"queue redelivery timeout \(5s\) must be longer than the job timeout \(10s\)"):
        spec(redelivery_timeout="5s")


def test_a_negative_max_retries_is_refused():
    # Rust's max_retries is a u32: retries under one claim are bounded. Here -1
    # would retry a not-sent effect for ever under the claim, past its lease.
    with pytest.raises(onceonly.InvalidInput, match=r"max_retries -1 must be 0 or more"):
        spec(max_retries=-1)


@pytest.mark.parametrize("call, error, words", [
    (lambda g: g.run("", P, Counting()), onceonly.InvalidKey, "operation key is empty"),
    (lambda g: g.run("a\nb", P, Counting()), onceonly.InvalidKey, "control character U\\+000A"),
    (lambda g: g.run("x" * 513, P, Counting()), onceonly.InvalidKey, "513 bytes"),
    (lambda g: g.run("k", Payload.of({"a": object()}), Counting()), onceonly.InvalidPayload, "object at \\$.a"),
])
def test_bad_input_is_refused_and_nothing_written(store, call, error, words):
    with pytest.raises(error, match=words):
        call(Guard(store, spec()))
    assert store.get("mail", "k") is None and store.get("mail", "") is None


def test_unknown_effect_kind_and_policy_are_named():
    with pytest.raises(onceonly.UnknownEffectKind, match="unknown effect kind 'smtp'"):
        spec(effect="smtp")
    with pytest.raises(onceonly.UnknownEffectKind, match="unknown stale-claim policy 'maybe'"):
        spec(effect="opaque", on_stale="maybe")


def test_unreachable_databases_are_named(tmp_path):
    with pytest.raises(onceonly.Unreachable, match=r"postgresql://u:\*\*\*@127.0.0.1:1/x unreachable"):
        onceonly.connect("postgresql://u:secret@127.0.0.1:1/x").migrate()
    with pytest.raises(onceonly.Unreachable, match="does not exist"):
        onceonly.connect(f"sqlite:///{tmp_path}/no/such/dir/x.db").migrate()
    with pytest.raises(onceonly.Unreachable, match=r"mysql://u:\*\*\*@127.0.0.1:1/x unreachable"):
        onceonly.connect("mysql://u:secret@127.0.0.1:1/x").migrate()
    with pytest.raises(onceonly.InvalidInput, match="not a database URL"):
        onceonly.connect("oracle://x")


def test_a_broken_postgres_connection_is_replaced(pg_store):
    import psycopg

    g = Guard(pg_store, spec())
    g.run("a", P, Counting())
    pid = pg_store._conn().info.backend_pid
    with psycopg.connect(pg_store.url, autocommit=True) as admin:  # as a server restart would
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(onceonly.OnceonlyError):
        g.run("b", P, Counting())
    assert isinstance(g.run("b", P, Counting()), Done)
    assert pg_store._conn().info.backend_pid != pid


def test_the_heartbeat_stops_renewing_at_the_job_timeout(store):
    # Rust stops a timed-out effect, and with it the heartbeat: a hung effect's
    # claim runs out one lease later and the policy decides (DESIGN.md 4).
    import time

    g = Guard(store, spec(effect="keyed", lease="300ms", timeout="400ms", heartbeat="100ms"))
    seen = {}

    def effect(ctx):
        time.sleep(1.2)
        snap = store.get("mail", "k")
        seen["lease_over"] = snap.record.lease_until <= snap.now
        return Sent("r", None)

    g.run("k", P, effect)
    assert seen["lease_over"], "the heartbeat renewed the lease past the job timeout"


def test_a_cancel_after_an_earlier_claim_holds_instead_of_cancelling(store):
    # protocol::cancel_unsent: the dead first claim may have sent; a keyed
    # destination cannot be searched, so a person must look, the request kept.
    stale_claim(store, "mail", "k")
    expire(store)

    def effect(ctx):
        assert store.request_cancel("mail", "k", ctx.token)
        raise NotSent("connection refused")

    out = Guard(store, spec(effect="keyed")).run("k", P, effect)
    assert isinstance(out, Held) and "an earlier claim of this operation may have acted" in out.reason
    rec = store.get("mail", "k").record
    assert (rec.state, rec.token, rec.cancel_requested) == (State.HELD, 2, True)
    assert [(e.event, e.from_state, e.to_state) for e in store.history("mail", "k")][-1] == (
        "hold", "claimed", "held")


def test_a_cancel_after_a_lookup_found_nothing_cancels(store):
    stale_claim(store, "mail", "k")
    expire(store)

    def effect(ctx):
        assert store.request_cancel("mail", "k", ctx.token)
        raise NotSent("connection refused")

    out = Guard(store, spec(effect="lookup")).run("k", P, effect, lookup=lambda ctx: None)
    assert out == Cancelled(None)
    assert store.get("mail", "k").record.state is State.CANCELLED


def test_a_cancel_on_the_first_claim_cancels(store):
    def effect(ctx):
        assert store.request_cancel("mail", "k", ctx.token)
        raise NotSent("connection refused")

    assert Guard(store, spec(effect="keyed")).run("k", P, effect) == Cancelled(None)
    assert store.get("mail", "k").record.state is State.CANCELLED


def test_an_unrenewed_lease_stops_the_effect_within_the_lease(store, monkeypatch):
    # The database is unreachable from this worker's heartbeat alone: the
    # effect is stopped before the lease runs out (another worker may take
    # it over then), its outcome unknown; keyed: released to be redone.
    import time

    from onceonly.errors import Unreachable

    def unreachable(*args, **kwargs):
        raise Unreachable("postgresql://db", "no route from this worker")

    monkeypatch.setattr(store, "heartbeat", unreachable)
    claimed_at = []
    claim = store.claim

    def timed_claim(*args, **kwargs):
        # The lease runs from the claim; timing from its return leaves out the
        # claim's own latency, which a loaded machine stretches.
        found = claim(*args, **kwargs)
        claimed_at.append(time.monotonic())
        return found

    monkeypatch.setattr(store, "claim", timed_claim)
    g = Guard(store, spec(effect="keyed", lease="600ms", timeout="20s", heartbeat="100ms"))
    acted, stopped = [], []

    def never(ctx):
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.01)
            acted.append(ctx.token)
            return Sent("late", None)
        finally:
            stopped.append(time.monotonic())

    out = g.run("k", P, never)
    elapsed = stopped[0] - claimed_at[0]
    assert elapsed < 0.6, f"stopped within the lease it could not renew ({elapsed:.2f}s)"
    assert isinstance(out, RetryLater) and "lease" in out.reason, out
    assert acted == [], "the stopped effect never acts"
    rec = store.get("mail", "k").record
    assert (rec.state, rec.token) == (State.QUEUED, 1)


def test_the_heartbeat_stops_an_effect_whose_claim_was_taken(store):
    # As the Rust guard drops it: the claim gone, the effect must not act.
    import time

    g = Guard(store, spec(effect="keyed", lease="300ms", timeout="3s", heartbeat="100ms"))
    other = Guard(store, g.spec, owner="other")
    reached_end = []

    def effect(ctx):
        expire(store, 60_000)
        assert isinstance(other.run("k", P, lambda c: Sent("theirs", None)), Done)
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            time.sleep(0.01)
        reached_end.append(ctx.token)
        return Sent("mine", None)

    with pytest.raises(LostClaim):
        g.run("k", P, effect)
    assert reached_end == [], "the effect went on after its claim was taken"
    assert store.get("mail", "k").record.external_ref == "theirs"
