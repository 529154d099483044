"""The count each scenario may produce, from the effect kind and stale-claim
policy alone, written before anything runs (a port of
crates/onceonly-replay/src/allowed.rs, same numbers and words)."""
from __future__ import annotations

from typing import Dict

COMPLETED, FAILED, HELD, CANCELLED = "completed", "failed", "held", "cancelled"


def _range(lo: int, hi: int, states, why: str, counted: str = "effects") -> Dict:
    return {"min": lo, "max": hi, "counted": counted, "states": list(states), "why": why}


def after_crash(kind: str, before: int) -> Dict:
    """What a kind permits once a worker died with ``before`` effects made and the operation came back after the lease."""
    if kind == "local":
        return _range(1, 1, [COMPLETED], "local: claim, effect and completion commit in one transaction; a crash rolls all back and the redelivery does it once")
    if kind == "keyed":
        return _range(1, 1, [COMPLETED], "keyed: the redo sends the same idempotency key and the destination keeps one item")
    if kind == "lookup":
        return _range(1, 1, [COMPLETED], "lookup: the redo looks the key up first; found, it completes with it; not found, it sends")
    if kind == "opaque/hold":
        return _range(before, before, [HELD], "hold: 0 extra effects; the stale claim is held for a person to resolve")
    if kind == "opaque/at-least-once":
        return _range(1, before + 1, [COMPLETED], "at-least-once: the stale claim is redone once, so at most 1 extra effect")
    if kind == "opaque/at-most-once":
        return _range(before, before, [FAILED], "at-most-once: the stale claim is given up as failed, so at most 1 missing effect and never an extra one")
    raise ValueError(kind)


def allowed(kind: str, scenario: str) -> Dict:
    if scenario == "repeat":
        return _range(1, 1, [COMPLETED], "a repeat of a completed operation gets its stored result without acting")
    if scenario == "concurrent":
        return _range(1, 1, [COMPLETED], "one claim wins the database's unique constraint; the other workers see it in progress or done")
    if scenario == "crash_after_claim":
        return after_crash(kind, 0)
    if scenario == "crash_after_effect":
        return after_crash(kind, 1)
    if scenario == "lease":
        a = after_crash(kind, 0)
        a["why"] = f"a claim younger than its lease is left alone; past it, {a['why']}"
        return a
    if scenario == "similar_data":
        return _range(2, 2, [COMPLETED], "two operation keys are two operations, however alike their data")
    if scenario == "cancel_while_sending":
        if kind == "local":
            a = _range(0, 0, [], "a local claim lives only inside its transaction: nothing outside can see it, or cancel it, while it runs")
            a["not_applicable"] = a["why"]
            return a
        return _range(0, 1, [CANCELLED, COMPLETED], "withdrawn at the destination (0 live, cancelled), or the withdraw failed and the completed record says so (1 live)", counted="live")
    if scenario == "failure_after_success":
        return _range(1, 1, [COMPLETED], "a failure write names a claim's token and state; on a completed record it changes 0 rows")
    if scenario == "other_payload":
        return _range(1, 1, [COMPLETED], "the same key with another payload is another operation reusing the key: refused, not a repeat")
    raise ValueError(scenario)
