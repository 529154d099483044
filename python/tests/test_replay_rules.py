"""The replay's allowed counts (written before a run) and its verdicts."""
import pytest

from onceonly.replay.allowed import allowed
from onceonly.replay.harness import judge


@pytest.mark.parametrize("kind, scenario, lo, hi, states", [
    ("keyed", "crash_after_effect", 1, 1, ["completed"]),
    ("opaque/hold", "crash_after_claim", 0, 0, ["held"]),
    ("opaque/hold", "crash_after_effect", 1, 1, ["held"]),
    ("opaque/at-least-once", "crash_after_effect", 1, 2, ["completed"]),
    ("opaque/at-most-once", "crash_after_claim", 0, 0, ["failed"]),
    ("opaque/at-most-once", "lease", 0, 0, ["failed"]),
    ("lookup", "concurrent", 1, 1, ["completed"]),
    ("local", "similar_data", 2, 2, ["completed"]),
])
def test_allowed_counts_follow_the_kind_and_policy(kind, scenario, lo, hi, states):
    a = allowed(kind, scenario)
    assert (a["min"], a["max"], a["states"]) == (lo, hi, states)


def test_cancel_counts_live_items_and_is_not_applicable_to_local():
    assert allowed("keyed", "cancel_while_sending")["counted"] == "live"
    assert allowed("local", "cancel_while_sending")["not_applicable"]


def test_a_count_or_state_outside_the_policy_fails_the_entry():
    a = allowed("opaque/hold", "crash_after_effect")
    assert judge(a, {"k": 1}, {"held": 1}, []) == []
    assert judge(a, {"k": 2}, {"held": 1}, []) == ["k: 2 counted, allowed 1-1"]
    assert judge(a, {"k": 1}, {"completed": 1}, []) == ["a record ended completed; allowed held"]
    assert judge(a, {"k": 1}, {"held": 1}, [{"name": "died", "passed": False, "detail": "no"}]) == ["check failed: died (no)"]
