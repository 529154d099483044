"""Every case of protocol/decisions.json, the paths of the Rust core's
decisions machine (crates/onceonly/src/protocol/decide.rs), run against this
client's port of it (onceonly.decide) and through its guard.

Machine-direct: each case's recorded answers are fed to onceonly.decide and
every step it emits must equal the recorded one exactly (as JSON text, so
``1`` is not ``true``). Through the guard: the cases the shell can reproduce
(no timing answers) run through the real Guard with a store and an effect
that answer from the transcript, and the statements, audit appends, effect
calls and outcome must be the case's."""
import json
from typing import Any, Dict, List, Optional

import pytest

from onceonly import Guard, JobSpec, Payload
from onceonly.canonical import canonical_json
from onceonly.decide import Decider
from onceonly.effect import NotSent, OutcomeUnknown, PermanentFailure, Sent
from onceonly.errors import OnceonlyError
from onceonly.record import Claim, Record, Snapshot, State
from conftest import REPO

DECISIONS = json.loads((REPO / "protocol" / "decisions.json").read_text())
CASES = DECISIONS["cases"]
NAMES = [c["name"] for c in CASES]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def replay(case: Dict[str, Any]) -> Optional[str]:
    """Runs ``case`` through the machine: None, or the first difference."""
    machine = Decider(case["job"], case["entry"])
    answer: Any = None
    for i, recorded in enumerate(case["steps"]):
        try:
            step = machine.next(answer)
        except Exception as e:  # noqa: BLE001 - a case the port cannot run is a failure, named
            return f"step {i}: the machine raised {type(e).__name__}: {e}\n  recorded: {_json(recorded['step'])}"
        if _json(step) != _json(recorded["step"]):
            return f"step {i}:\n  machine:  {_json(step)}\n  recorded: {_json(recorded['step'])}"
        answer = recorded.get("answer")
    if case["steps"][-1]["step"]["do"] not in ("finish", "error"):
        return "the case does not end in finish or error"
    return None


def test_every_case_runs_machine_direct(capsys):
    assert DECISIONS["count"] == len(CASES) > 0
    assert len(set(NAMES)) == len(NAMES), "two cases share a name"
    failures = [f"{c['name']}: {why}" for c in CASES if (why := replay(c)) is not None]
    with capsys.disabled():
        print(f"\ndecisions: {len(CASES)} cases")
    assert not failures, f"{len(failures)} of {len(CASES)} cases differ; the first:\n" + "\n".join(failures[:3])


def test_a_changed_step_fails_the_replay():
    """The comparison can fail: a case with one recorded step altered differs."""
    case = json.loads(json.dumps(CASES[0]))
    case["steps"][0]["step"]["do"] = "read"
    assert replay(case) is not None
    case = json.loads(json.dumps(next(c for c in CASES if any(s["step"]["do"] == "move" for s in c["steps"]))))
    move = next(s["step"] for s in case["steps"] if s["step"]["do"] == "move")
    move["token"] = True if move["token"] == 1 else 1  # JSON's true is not 1
    assert replay(case) is not None
