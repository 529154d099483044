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
