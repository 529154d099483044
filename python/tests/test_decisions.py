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
from typing import Any, Dict, Optional

from onceonly import Guard, JobSpec, Payload
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


def test_every_audit_event_of_the_cases_is_one_this_client_knows():
    from onceonly.protocol import AUDIT_EVENTS

    events = {s["step"]["event"] for c in CASES for s in c["steps"] if s["step"]["do"] == "audit"}
    assert events and events <= set(AUDIT_EVENTS), events - set(AUDIT_EVENTS)


def test_a_changed_step_fails_the_replay():
    """The comparison can fail: a case with one recorded step altered differs."""
    case = json.loads(json.dumps(CASES[0]))
    case["steps"][0]["step"]["do"] = "read"
    assert replay(case) is not None
    case = json.loads(json.dumps(next(c for c in CASES if any(s["step"]["do"] == "move" for s in c["steps"]))))
    move = next(s["step"] for s in case["steps"] if s["step"]["do"] == "move")
    move["token"] = True if move["token"] == 1 else 1  # JSON's true is not 1
    assert replay(case) is not None


# -- through the guard ------------------------------------------------------------

# Answers only timing produces (the job timeout, a heartbeat that lost the
# claim or could not renew the lease): the shell's own tests cover them
# (test_guard.py), not a script. Entries this client has no API for (it has
# no relay): run_claimed, release_unstarted.
TIMING = {'"timed_out"', '"claim_lost"', '{"lease_unrenewed": "connection reset"}'}
SHELL_ENTRIES = {"run", "local"}


def through_the_guard(case: Dict[str, Any]) -> bool:
    return case["entry"]["entry"] in SHELL_ENTRIES and not any(
        s["step"]["do"] in ("perform", "lookup", "sleep") and json.dumps(s.get("answer")) in TIMING
        for s in case["steps"])


SHELL_CASES = [c for c in CASES if through_the_guard(c)]


class Script:
    """The case's transcript, taken step by step as the guard does its I/O:
    each call checks that it is the step the case records next, with the
    same parameters, and returns the recorded answer."""

    def __init__(self, case: Dict[str, Any]):
        self.name, self.steps, self.at = case["name"], case["steps"], 0
        self.wrong: Optional[str] = None  # kept: the guard swallows a failed audit append

    def take(self, do: str, **seen: Any) -> Any:
        self._check(do, seen)
        self.at += 1
        return self.steps[self.at - 1].get("answer")

    def _check(self, do: str, seen: Dict[str, Any]) -> None:
        if self.at >= len(self.steps):
            self._wrong(f"the guard did {do} after the case's end")
        step = self.steps[self.at]["step"]
        if step["do"] != do:
            self._wrong(f"step {self.at}: the guard did {do} {seen}; the case has {_json(step)}")
        for field, value in seen.items():
            if _json(value) != _json(step[field]):
                self._wrong(f"step {self.at} ({do}): {field} is {_json(value)}, the case has {_json(step[field])}")

    def _wrong(self, why: str) -> None:
        self.wrong = self.wrong or f"{self.name}: {why}"
        raise AssertionError(self.wrong)

    def end(self) -> Dict[str, Any]:
        assert self.wrong is None, self.wrong
        assert self.at == len(self.steps) - 1, (
            f"{self.name}: the guard ended at step {self.at}; the case has {_json(self.steps[self.at]['step'])}")
        return self.steps[self.at]["step"]


def _record(row: Dict[str, Any]) -> Snapshot:
    d = DECISIONS["delivery"]
    record = Record(
        job_type=d["job_type"], op_key=d["op_key"], state=State(row["state"]), token=row["token"],
        owner=row["owner"], attempts=row["attempts"], fingerprint=row["fingerprint"], payload=None,
        external_ref=row["external_ref"], result=row["result"], cancel_requested=row["cancel_requested"],
        error=row["error"], due_at=row["due_at_ms"], claimed_at=row["claimed_at_ms"],
        lease_until=row["lease_until_ms"], created_at=0, updated_at=0, completed_at=None)
    return Snapshot(record, row["now_ms"])


def _claim(answer: Dict[str, Any]) -> Claim:
    return Claim(answer["token"], answer["attempts"], 0, 0)


class ScriptedStore:
    """A store that answers from the script (the interface the guard calls)."""

    dialect = "sqlite"

    def __init__(self, script: Script):
        self.script = script

    def claim(self, job, key, owner, payload, lease_ms):
        answer = self.script.take("claim")
        return _claim(answer["claimed"]) if "claimed" in answer else _record(answer["existing"])

    def claim_in(self, conn, job, key, owner, payload, lease_ms):
        return self.claim(job, key, owner, payload, lease_ms)

    def take_over(self, job, key, stale_token, to, owner, lease_ms, reason):
        settle = {State.CLAIMED: "redo", State.HELD: "hold", State.FAILED: "fail"}[to]
        answer = self.script.take("take_over", settle=settle, stale_token=stale_token, reason=reason)
        return None if answer is None else _claim(answer)

    def get(self, job, key, conn=None, raw=False):
        answer = self.script.take("read")
        return None if answer is None else _record(answer)

    def move(self, p, conn=None):
        from onceonly.protocol import OWNER_MOVES

        name = next(n for n, (f, t, fence) in OWNER_MOVES.items()
                    if (f, t, fence) == (p.from_state, p.to, p.unless_cancel_requested))
        return self.script.take("move", move=name, token=p.token, external_ref=p.external_ref,
                                result=p.result, error=p.error, retry_after_ms=p.retry_after_ms)

    def audit(self, job, key, event, actor, token, from_state, to, detail, attempt=None, retry_after_ms=None):
        self.script.take("audit", event=event, token=token, **{"from": from_state.value, "to": to.value},
                         detail=detail, attempt=attempt, retry_after_ms=retry_after_ms)

    def heartbeat(self, *args, **kwargs):  # pragma: no cover - the spec has no heartbeat
        raise AssertionError("no heartbeat in a scripted case")


class SoftTimeLimitExceeded(Exception):
    """Stands for Celery's (the name the cases give an interrupt)."""


def _raise_for(answer: Dict[str, Any]):
    (word, why), = answer.items()
    if word == "interrupted":
        assert why == SoftTimeLimitExceeded.__name__
        raise SoftTimeLimitExceeded()
    raise {"not_sent": NotSent, "unknown": OutcomeUnknown, "failed": PermanentFailure}[word](why)


def _expected(outcome: Dict[str, Any], last_now: Optional[int]):
    from onceonly import outcome as o

    (name, f), = outcome.items()
    return {
        "done": lambda: o.Done(f["result"], f["external_ref"], repeat=f["repeat"]),
        "in_progress": lambda: o.InProgress(f["age_ms"], f["lease_ms"], f["owner"]),
        "held": lambda: o.Held(f["reason"]),
        "failed": lambda: o.Failed(f["error"]),
        "cancelled": lambda: o.Cancelled(f["withdrawn_ref"]),
        "retry_later": lambda: o.RetryLater(f["reason"], f["retry_after_ms"]),
        "not_due": lambda: o.NotDue(f["due_at_ms"], last_now),
        "withdraw_failed": lambda: o.WithdrawFailed(f["external_ref"], f["error"]),
    }[name]()


def _check_error(case: Dict[str, Any], error: Dict[str, Any], raised: BaseException) -> None:
    import onceonly.errors as e

    (name, f), = error.items()
    kind = {"lost_claim": e.LostClaim, "payload_mismatch": e.PayloadMismatch, "not_found": e.NotFound,
            "injected_crash": e.InjectedCrash, "local_effect_failed": e.LocalEffectFailed}[name]
    assert isinstance(raised, kind), f"{case['name']}: raised {raised!r}, the case ends in {name}"
    if name == "lost_claim":
        assert (raised.token, raised.record.state.value, raised.record.token) == (
            f["token"], f["row"]["state"], f["row"]["token"])
    elif name == "payload_mismatch":
        assert (raised.stored, raised.offered) == (f["stored"], f["offered"])
    elif name == "injected_crash":
        assert raised.point == f["point"]
    elif name == "local_effect_failed":
        assert str(raised).endswith(f": {f['why']}"), str(raised)


def _spec(job: Dict[str, Any]) -> JobSpec:
    return JobSpec(job_type=DECISIONS["delivery"]["job_type"], effect=job["effect"],
                   on_stale=(job["on_stale"] or "hold").replace("_", "-"), max_retries=job["max_retries"],
                   lease_ms=job["lease_ms"], timeout_ms=job["timeout_ms"])


def run_through_the_guard(case: Dict[str, Any], monkeypatch) -> None:
    import sqlite3
    import time
    import types

    import onceonly.guard

    script = Script(case)
    delivery = DECISIONS["delivery"]
    # The flag heartbeats keep, and the sleeps between tries, from the script.
    monkeypatch.setattr(onceonly.effect.EffectCtx, "cancel_requested", lambda ctx: script.take("cancel_requested"))
    monkeypatch.setattr(onceonly.guard, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=lambda s: script.take("sleep", ms=round(s * 1000))))
    guard = Guard(ScriptedStore(script), _spec(case["job"]), owner=delivery["owner"],
                  fault_hook=lambda point: script.take("fault", point=point),
                  interrupts=(SoftTimeLimitExceeded,))
    payload = Payload(None, delivery["fingerprint"])

    def perform(ctx):
        answer = script.take("perform")
        if "done" in answer:
            return Sent(answer["done"]["external_ref"], answer["done"]["result"])
        _raise_for(answer)

    def lookup(ctx):
        answer = script.take("lookup")
        if answer == "not_found":
            return None
        if "found" in answer:
            return Sent(answer["found"]["external_ref"], answer["found"]["result"])
        if "unavailable" in answer:
            raise ConnectionError(answer["unavailable"])
        _raise_for(answer)

    def withdraw(ctx, external_ref):
        answer = script.take("withdraw", external_ref=external_ref)
        if answer != "withdrawn":
            raise RuntimeError(answer["not_withdrawn"])

    def local(conn, ctx):
        answer = script.take("perform")
        if "done" in answer:
            return answer["done"]["result"]
        kind, _, message = answer["raised"].partition(": ")
        raise {"ValueError": ValueError}[kind](message)

    raised: Optional[BaseException] = None
    outcome = None
    try:
        if case["entry"]["entry"] == "local":
            outcome = guard.run_local(sqlite3.connect(":memory:"), delivery["op_key"], payload, local)
        else:
            outcome = guard.run(delivery["op_key"], payload, perform, lookup, withdraw)
    except OnceonlyError as e:
        raised = e
    end = script.end()
    if end["do"] == "finish":
        assert raised is None, f"{case['name']}: raised {raised!r}; the case finishes {_json(end)}"
        reads = [s["answer"] for s in case["steps"] if s["step"]["do"] in ("claim", "read") and s.get("answer")]
        last = reads[-1].get("existing", reads[-1]) if reads else {}
        assert outcome == _expected(end["outcome"], last.get("now_ms")), f"{case['name']}: {outcome!r}"
    else:
        assert raised is not None, f"{case['name']}: returned {outcome!r}; the case ends in {_json(end)}"
        _check_error(case, end["error"], raised)


def test_the_cases_without_timing_run_through_the_guard(monkeypatch, capsys):
    assert len(SHELL_CASES) > len(CASES) // 4
    for case in SHELL_CASES:
        with monkeypatch.context() as m:
            run_through_the_guard(case, m)
    with capsys.disabled():
        print(f"\ndecisions through the guard: {len(SHELL_CASES)} of {len(CASES)} cases")


def test_a_stop_between_tries_answers_the_sleep_and_the_next_try_is_not_made(store):
    """The timing answers the scripted cases leave out, as the shell gives
    them: a heartbeat that found the claim gone (or could not renew the
    lease) while no effect ran answers the sleep it happened in, and any
    later lookup or perform, without calling the effect."""
    import time as clock

    from onceonly import guard as shell
    from conftest import spec

    class StoppedBeat:
        def __init__(self, answer):
            self.answer = answer

        def wait(self, seconds):
            pass

        def stop(self):
            pass

    g = Guard(store, spec(effect="lookup", heartbeat="100ms", lease="600ms", timeout="5s"))
    calls = []
    for answer in ("claim_lost", {"lease_unrenewed": "no route"}):
        d = shell._Delivery("k", Payload.of(1), perform=lambda ctx: calls.append("perform"),
                            lookup=lambda ctx: calls.append("lookup"))
        g._claimed(Claim(1, 1, 0, 0), d)
        d.beat = StoppedBeat(answer)
        assert g._sleep({"do": "sleep", "ms": 20}, d) == answer
        assert g._perform({"do": "perform", "try": 2}, d) == answer
        assert g._lookup({"do": "lookup"}, d) == answer
    assert calls == []
    d.beat = None
    d.ctx.deadline = clock.monotonic()  # the job timeout ran out
    assert g._sleep({"do": "sleep", "ms": 20}, d) == "timed_out"
