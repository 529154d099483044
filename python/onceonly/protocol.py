"""The stale-claim policy and the cancel rule, as crates/onceonly/src/protocol/policy.rs
defines them; tests/test_protocol.py checks them against protocol/transitions.json."""
from __future__ import annotations

from .record import State
from .spec import Kind, StalePolicy

REDO, HOLD, FAIL = "redo", "hold", "fail"


def policy(kind: Kind, on_stale: StalePolicy, attempts: int) -> str:
    """What a claim in doubt becomes after ``attempts`` claims: redo, hold or fail.

    Keyed, lookup and local effects redo safely; opaque ones follow their
    policy, at-least-once redoing once and holding a second claim in doubt.
    """
    if kind is not Kind.OPAQUE:
        return REDO
    if on_stale is StalePolicy.HOLD:
        return HOLD
    if on_stale is StalePolicy.AT_MOST_ONCE:
        return FAIL
    return HOLD if attempts >= 2 else REDO


def take_over_to(settle: str) -> State:
    """The state a take-over moves the stale claim to."""
    return {REDO: State.CLAIMED, HOLD: State.HELD, FAIL: State.FAILED}[settle]


def owner_move(settle: str) -> State:
    """Where the owner moves its claim for an unknown outcome (queued: released)."""
    return {REDO: State.QUEUED, HOLD: State.HELD, FAIL: State.FAILED}[settle]


def cancel_unsent(attempts: int, looked_up: bool) -> State:
    """The owner's move when a cancel was requested and its claim did not act:
    cancelled when nothing of the operation can be live (the first claim, or a
    lookup under this claim found nothing), else held for a person, as an
    earlier claim may have acted and nobody can tell."""
    return State.CANCELLED if attempts <= 1 or looked_up else State.HELD
