"""The stale-claim policy and the cancel rule, as crates/onceonly/src/protocol/policy.rs
defines them; tests/test_protocol.py checks them against protocol/transitions.json."""
from __future__ import annotations

from .record import State
from .spec import Kind, StalePolicy
from .stores.params import OpMove

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


# The owner's moves of its claim (the `move` statement): name -> (from, to,
# refused while a cancel is requested). tests/test_protocol.py checks them
# against the transitions of protocol/transitions.json.
OWNER_MOVES = {
    "complete": (State.CLAIMED, State.COMPLETED, True),
    "release": (State.CLAIMED, State.QUEUED, True),
    "fail": (State.CLAIMED, State.FAILED, False),
    "hold": (State.CLAIMED, State.HELD, False),
    "cancel_claimed": (State.CLAIMED, State.CANCELLED, False),
    "complete_withdraw_failed": (State.CLAIMED, State.COMPLETED, False),
}


# The audit events this client appends: name -> the transitions after which
# it does (as crates/onceonly/src/audit.rs, AuditKind). tests/test_protocol.py
# checks them against the audit_events of protocol/transitions.json. (Its
# guard has no relay, so never gives a claim back unstarted; `released` is
# here because its port of the decisions machine, onceonly.decide, has that
# entry too. Operator actions are the Rust CLI's and console's.)
TAKE_OVER, HOLD_EVENT, LOST_CLAIM, CANCELLED = "take_over", "hold", "lost_claim", "cancelled"
COMPENSATED, WITHDRAW_FAILED, FAILED, RETRY = "compensated", "withdraw_failed", "failed", "retry"
RELEASED = "released"
AUDIT_EVENTS = {
    TAKE_OVER: ("take_over", "take_over_hold", "take_over_fail"),
    HOLD_EVENT: ("hold",),
    LOST_CLAIM: ("heartbeat", "complete", "release", "fail", "hold", "cancel_claimed", "complete_withdraw_failed"),
    CANCELLED: ("cancel_claimed",),
    COMPENSATED: ("cancel_claimed",),
    WITHDRAW_FAILED: ("complete_withdraw_failed",),
    FAILED: ("fail",),
    RETRY: ("release",),
    RELEASED: ("release",),
}


def owner_op(name: str, job_type: str, op_key: str, token: int, **fields) -> OpMove:
    """The parameters of the owner's move ``name`` of the claim with ``token``."""
    from_state, to, unless_cancel_requested = OWNER_MOVES[name]
    return OpMove(job_type, op_key, token, from_state, to,
                  unless_cancel_requested=unless_cancel_requested, **fields)
