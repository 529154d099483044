"""Guard(interrupts=...): an attempt stopped from outside (Celery's soft time
limit) is recorded at once, never retried in the process under the claim;
a local effect's transaction rolls back and the interrupt is raised again.
tests/test_celery_limits.py runs the same through a real prefork worker."""
import sqlite3

import pytest

import onceonly
from onceonly import Guard, Held, Payload, RetryLater, State
from onceonly.stores.sqlite import path_of
from conftest import spec

P = Payload.of({"to": "a@example.com"})


class Stopped(Exception):
    """Stands for SoftTimeLimitExceeded (an Exception, as Celery's is)."""


class Raising:
    def __init__(self):
        self.calls = 0

    def __call__(self, ctx):
        self.calls += 1
        raise Stopped()


@pytest.mark.parametrize("interrupts, calls", [((), 4), ((Stopped,), 1)])
def test_a_keyed_effect_interrupted_is_released_at_once_not_called_again(store, interrupts, calls):
    effect = Raising()
    out = Guard(store, spec(effect="keyed"), interrupts=interrupts).run("k", P, effect)
    assert isinstance(out, RetryLater) and effect.calls == calls  # without interrupts: 1 + max_retries
    assert store.get("mail", "k").record.state is State.QUEUED
    if interrupts:
        (retry,) = store.history("mail", "k")
        assert (retry.event, retry.attempt, retry.detail) == ("retry", 1, "the effect was stopped at the time limit (Stopped)")


def test_a_lookup_interrupted_is_not_sent_and_not_looked_up_again(store):
    g = Guard(store, spec(effect="lookup"), interrupts=(Stopped,))
    assert isinstance(g.run("k", P, Raising(), lookup=lambda ctx: None), RetryLater)
    store.clock_offset_ms += 60_000
    looks = Raising()
    effect = Raising()
    assert isinstance(g.run("k", P, effect, lookup=looks), RetryLater)
    assert (looks.calls, effect.calls) == (1, 0)
    assert store.history("mail", "k")[-1].detail == "lookup unavailable: was stopped at the time limit (Stopped)"


def test_an_opaque_effect_interrupted_follows_its_policy(store):
    effect = Raising()
    out = Guard(store, spec(effect="opaque", on_stale="hold"), interrupts=(Stopped,)).run("k", P, effect)
    assert isinstance(out, Held) and effect.calls == 1
    assert store.get("mail", "k").record.state is State.HELD


def test_a_local_effect_interrupted_rolls_back_and_raises_the_interrupt(sqlite_store):
    conn = sqlite3.connect(path_of(sqlite_store.url))
    conn.execute("CREATE TABLE shipped (k TEXT)")

    def effect(c, ctx):
        c.execute("INSERT INTO shipped VALUES ('k')")
        raise Stopped()

    g = Guard(sqlite_store, spec(effect="local"), interrupts=(Stopped,))
    with pytest.raises(Stopped):
        g.run_local(conn, "k", P, effect)
    assert sqlite_store.get("mail", "k") is None
    assert conn.execute("SELECT count(*) FROM shipped").fetchone() == (0,)
    with pytest.raises(onceonly.LocalEffectFailed, match="Stopped"):
        Guard(sqlite_store, spec(effect="local")).run_local(conn, "k", P, effect)
