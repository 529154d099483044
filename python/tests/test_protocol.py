"""The client's policy and cancel rule against protocol/transitions.json, the
table written from the Rust definition: a rule changed in Rust fails here
until it is ported (the guard takes its moves from onceonly.protocol)."""
import json

import pytest

from onceonly.protocol import cancel_unsent, owner_move, policy, take_over_to
from onceonly.record import State
from onceonly.spec import Kind, StalePolicy
from conftest import REPO

TABLE = json.loads((REPO / "protocol" / "transitions.json").read_text())
TO = {t["name"]: t["to"] for t in TABLE["transitions"]}


def test_the_states_are_the_protocol_s():
    assert sorted(s.value for s in State) == sorted(TABLE["states"])


def test_the_policy_table_covers_every_kind_and_policy_this_client_knows():
    covered = {(r["kind"], r["policy"]) for r in TABLE["policy"]}
    known = {(k.value, None) for k in Kind if k is not Kind.OPAQUE}
    known |= {(Kind.OPAQUE.value, p.value) for p in StalePolicy}
    assert covered == known


@pytest.mark.parametrize("row", TABLE["policy"], ids=lambda r: f"{r['kind']}/{r['policy']}/{r['attempts']}")
def test_policy_follows_the_protocol(row):
    settle = policy(Kind(row["kind"]), StalePolicy(row["policy"] or "hold"), row["attempts"])
    assert settle == row["settle"]
    assert take_over_to(settle).value == row["take_over_to"]
    assert owner_move(settle).value == TO[row["owner_move"]], f"the owner's move is {row['owner_move']}"


@pytest.mark.parametrize("row", TABLE["cancel_unsent"], ids=lambda r: f"{r['attempts']}/{r['looked_up']}")
def test_cancel_unsent_follows_the_protocol(row):
    assert cancel_unsent(row["attempts"], row["looked_up"]).value == TO[row["move"]], row


OWNER_MOVE_ROWS = [t for t in TABLE["transitions"] if t["by"] == "owner" and t["statement"] == "move"]


def test_every_owner_move_of_the_protocol_is_the_client_s():
    from onceonly.protocol import OWNER_MOVES

    assert sorted(OWNER_MOVES) == sorted(t["name"] for t in OWNER_MOVE_ROWS)


@pytest.mark.parametrize("rule", OWNER_MOVE_ROWS, ids=lambda t: t["name"])
def test_owner_moves_have_the_protocol_s_states_and_fences(rule):
    from onceonly.protocol import owner_op

    assert rule["token"] == "matches"  # owner_op always carries the claim's token
    p = owner_op(rule["name"], "job", "key", 7)
    assert (p.from_state.value, p.to.value, p.token) == (rule["from"], rule["to"], 7)
    assert p.unless_cancel_requested == (rule["cancel"] == "not_requested")


AUDIT_ROWS = {e["name"]: e for e in TABLE["audit_events"]}


def test_every_audit_event_this_client_writes_is_the_protocol_s():
    from onceonly.protocol import AUDIT_EVENTS

    for name, after in AUDIT_EVENTS.items():
        assert name in AUDIT_ROWS, f"{name} is not an audit event of the protocol"
        assert set(after) <= set(AUDIT_ROWS[name]["after"]), name


def test_the_release_events_are_the_protocol_s():
    from onceonly.protocol import RETRY

    assert AUDIT_ROWS[RETRY]["after"] == ["release"] and AUDIT_ROWS[RETRY]["attempt"]
    # Every other event of the protocol that a worker's own release writes
    # is one this client's guard has no path to (a relay's shutdown release;
    # its port of the decisions machine has it, checked by test_decisions).
    assert {n for n, e in AUDIT_ROWS.items() if "release" in e["after"] and e["on"] == "moved"} == {RETRY, "released"}
