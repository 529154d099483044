"""The guard's decisions as a step machine, ported from the Rust core's
``crates/onceonly/src/protocol/decide.rs``: the same phases, steps and
messages. It is pure: no store, no threads, no clock. The guard
(:mod:`onceonly.guard`) is its interpreter and does the I/O.

``Decider(job, entry)``, then ``decider.next(answer)`` repeatedly: each call
returns the next step, a plain ``dict`` in the JSON form of
``protocol/decisions.json`` (``{"do": "claim"}``, ``{"do": "move", ...}``),
given the answer to the step before (``None`` for the first). The last step
is ``finish`` (an outcome) or ``error``. ``tests/test_decisions.py`` runs
every case of ``protocol/decisions.json`` through it.

The job is a dict: ``effect`` (``keyed``, ``lookup``, ``opaque``,
``local``), ``on_stale`` (``hold``, ``at_least_once``, ``at_most_once``; None
unless opaque), ``max_retries``, ``lease_ms``, ``timeout_ms``. The entry says
how a case starts: ``{"entry": "run", "fingerprint"}`` (one delivery),
``{"entry": "run_claimed", "claim": {"token", "attempts"}}`` (a claim taken
elsewhere), ``{"entry": "release_unstarted", "claim", "reason"}`` (that claim
given back before acting) and ``{"entry": "local", "fingerprint"}`` (a local
effect in the caller's transaction).

A row (an answer to ``claim``, ``read``) is the record as the machine needs
it: ``state``, ``token``, ``attempts``, ``owner``, ``fingerprint``,
``claimed_at_ms``, ``lease_until_ms``, ``due_at_ms``, ``external_ref``,
``result`` (the stored JSON text), ``error``, ``cancel_requested``, and
``now_ms``, the database's time when it was read.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Generator, Mapping, Optional, Tuple

from . import answer as answer_rules
from .canonical import canonical_json
from .protocol import (CANCELLED as CANCELLED_EVENT, COMPENSATED, FAIL, FAILED as FAILED_EVENT, HOLD_EVENT,
                       LOST_CLAIM, OWNER_MOVES, REDO, RELEASED, RETRY, TAKE_OVER, WITHDRAW_FAILED, cancel_unsent,
                       owner_move, policy, take_over_to)
from .record import State
from .spec import Kind, StalePolicy, fmt_ms

Step = Dict[str, Any]
Answer = Any
Row = Mapping[str, Any]

# The answers' words (a bare string answer, or the one key of a dict answer).
CLAIMED, EXISTING = "claimed", "existing"
CONTINUE, CRASH = "continue", "crash"
SLEPT, TIMED_OUT = "slept", "timed_out"
DONE, NOT_SENT, UNKNOWN, FAILED = "done", "not_sent", "unknown", "failed"
LEASE_UNRENEWED, CLAIM_LOST, INTERRUPTED = "lease_unrenewed", "claim_lost", "interrupted"
FOUND, NOT_FOUND, UNAVAILABLE = "found", "not_found", "unavailable"
WITHDRAWN, NOT_WITHDRAWN = "withdrawn", "not_withdrawn"
RAISED = "raised"

AFTER_CLAIM, AFTER_EFFECT = "after_claim", "after_effect"

# How a not-sent outcome from an unanswered lookup begins.
LOOKUP_UNAVAILABLE = "lookup unavailable"

# The first sleep before a retry under the claim; it doubles per retry.
FIRST_RETRY_SLEEP_MS = 20

# The states, as the record names them.
QUEUED, CLAIMED_STATE, COMPLETED = "queued", "claimed", "completed"
FAILED_STATE, HELD, CANCELLED = "failed", "held", "cancelled"

# The audit event a fenced move of the owner appends after it.
_FENCED_EVENT = {"hold": HOLD_EVENT, "cancel_claimed": CANCELLED_EVENT, "fail": FAILED_EVENT}


def settle(effect: str, on_stale: Optional[str], attempts: int) -> str:
    """What a claim in doubt becomes after ``attempts`` claims (:func:`protocol.policy`):
    ``redo``, ``hold`` or ``fail``."""
    stale = StalePolicy.parse(on_stale.replace("_", "-")) if on_stale else StalePolicy.HOLD
    return policy(Kind.parse(effect), stale, attempts)


def _to(move: str) -> str:
    """The state the owner's ``move`` takes its claim to."""
    return OWNER_MOVES[move][1].value


def retry_backoff_ms(attempt: int) -> int:
    """How long a released operation waits before it is due again: 500ms
    after the first claim, doubling per claim, at most a minute."""
    doublings = min(max(attempt - 1, 0), 7)
    return min(500 * 2**doublings, 60_000)


def kind_of(answer: Answer) -> Tuple[str, Any]:
    """An answer's word and what it carries: ``"slept"`` is ``("slept", None)``,
    ``{"done": {...}}`` is ``("done", {...})``; ``None`` is ``(None, None)``."""
    if isinstance(answer, Mapping):
        if len(answer) != 1:
            raise ValueError(f"an answer has one key, not {sorted(answer)}")
        (word, value), = answer.items()
        return word, value
    if answer is None or isinstance(answer, str):
        return answer, None
    raise ValueError(f"not an answer: {answer!r}")


class Decider:
    """One run of the machine: ``next(answer)`` gives the next step."""

    def __init__(self, job: Mapping[str, Any], entry: Mapping[str, Any]):
        self._steps = _Machine(job).start(entry)
        self._started = False
        self._end: Optional[Step] = None

    def next(self, answer: Answer = None) -> Step:
        """The step after ``answer`` (the answer to the step before; ``None``
        first and to an audit append). After the end, the end again."""
        if self._end is not None:
            return self._end
        if not self._started:
            self._started = True
            step = next(self._steps)
        else:
            step = self._steps.send(answer)
        if step["do"] in ("finish", "error"):
            self._end = step
        return step


Steps = Generator[Step, Answer, Any]


class _Ended(Exception):
    """Carries the last step (finish or error) up from where it was decided."""

    def __init__(self, step: Step):
        super().__init__(step["do"])
        self.step = step


def _finish(outcome: str, **fields: Any) -> _Ended:
    return _Ended({"do": "finish", "outcome": {outcome: fields}})


def _error(error: str, **fields: Any) -> _Ended:
    return _Ended({"do": "error", "error": {error: fields}})


class _Machine:
    """The decisions as one generator per phase, as decide.rs's ``Run``: each
    ``yield`` is a step, and what it evaluates to is that step's answer; the
    end is raised (:class:`_Ended`) from wherever it is decided."""

    def __init__(self, job: Mapping[str, Any]):
        self.job = job
        self.effect: str = job["effect"]
        self.on_stale: Optional[str] = job.get("on_stale")
        self.token = 0
        self.attempt = 0

    def start(self, entry: Mapping[str, Any]) -> Steps:
        how = entry["entry"]
        try:
            if how == "run":
                yield from self._run(entry["fingerprint"])
            elif how == "run_claimed":
                self._hold(entry["claim"])
                yield from self._act(after_stale=False)
            elif how == "release_unstarted":
                self._hold(entry["claim"])
                yield from self._release_or_cancel(entry["reason"], None, looked_up=False)
            elif how == "local":
                yield from self._local(entry["fingerprint"])
            else:
                raise ValueError(f"no entry {how!r}")
        except _Ended as end:
            yield end.step
            return
        raise AssertionError("the machine ran out without a finish or an error")

    def _hold(self, claim: Mapping[str, Any]) -> None:
        self.token, self.attempt = int(claim["token"]), int(claim["attempts"])

    # -- a delivery ---------------------------------------------------------------
    def _run(self, fingerprint: str) -> Steps:
        word, found = kind_of((yield {"do": "claim"}))
        if word == CLAIMED:
            self._hold(found)
            yield from self._act(after_stale=False)
        stale = self._decide(found, fingerprint)
        how = settle(self.effect, self.on_stale, stale["attempts"])
        who = stale.get("owner") or "?"
        if how == REDO:
            reason = f"took over a claim of {who} past its lease"
        elif how == FAIL:
            reason = "claim went past its lease; given up under at-most-once (the effect may be missing)"
        elif self.on_stale == "at_least_once":
            reason = "a redo under at-least-once also went past its lease; held to keep to one extra"
        else:
            reason = f"claim by {who} went past its lease; the effect may or may not have happened"
        taken = yield {"do": "take_over", "settle": how, "stale_token": stale["token"], "reason": reason}
        if taken is not None:  # the claim taken: {"token", "attempts"}
            claim = taken
            yield self._audit(TAKE_OVER, int(claim["token"]), CLAIMED_STATE, take_over_to(how).value,
                              f"stale token {stale['token']}: {reason}")
            if how == REDO:
                self._hold(claim)
                yield from self._act(after_stale=True)
        yield from self._settled_after_race(fingerprint)

    def _decide(self, row: Row, fingerprint: str) -> Row:
        """What an existing row means for this delivery: the end, or the stale row to take over."""
        if row["fingerprint"] != fingerprint:
            raise _error("payload_mismatch", stored=row["fingerprint"], offered=fingerprint)
        state, now = row["state"], row["now_ms"]
        if state == COMPLETED:
            raise _finish("done", result=_stored_value(row.get("result")),
                          external_ref=row.get("external_ref"), repeat=True)
        if state == FAILED_STATE:
            raise _finish("failed", error=row.get("error"))
        if state == CANCELLED:
            raise _finish("cancelled", withdrawn_ref=None)
        if state == HELD:
            raise _finish("held", reason=row.get("error"))
        if state == QUEUED:
            raise _finish("not_due", due_at_ms=row.get("due_at_ms"))
        lease_until = row.get("lease_until_ms")
        if lease_until is None or lease_until <= now:
            return row
        claimed_at = _or(row.get("claimed_at_ms"), now)
        raise _finish("in_progress", age_ms=max(now - claimed_at, 0),
                      lease_ms=max(lease_until - claimed_at, 0), owner=row.get("owner"))

    def _settled_after_race(self, fingerprint: str) -> Steps:
        """After a lost take-over race or a settled take-over: the row as it stands."""
        row = yield {"do": "read"}
        if row is None:
            raise _error("not_found")
        stale = self._decide(row, fingerprint)
        # Still stale: someone else is taking it over right now.
        raise self._in_progress_stale(stale)

    def _in_progress_stale(self, stale: Row) -> _Ended:
        now = stale["now_ms"]
        return _finish("in_progress", age_ms=max(now - _or(stale.get("claimed_at_ms"), now), 0),
                       lease_ms=self.job["lease_ms"], owner=stale.get("owner"))

    # -- acting under the claim ---------------------------------------------------
    def _act(self, after_stale: bool) -> Steps:
        yield from self._fault(AFTER_CLAIM)
        try:
            report = yield from self._attempts(after_stale)
        except _Stop as stop:
            report = stop.report
        if report[0] == DONE:
            report = _within_answer_rules(report)
        yield from self._record(report)

    def _attempts(self, after_stale: bool) -> Generator[Step, Answer, Tuple[str, Any]]:
        """The effect, retried under the claim where the kind allows it: the report to record."""
        look_first = self.effect == "lookup" and (after_stale or self.attempt > 1)
        retries_left, sleep_ms, tries = int(self.job["max_retries"]), FIRST_RETRY_SLEEP_MS, 0
        while True:
            if look_first:
                report = yield from self._lookup()
                if report is not None:
                    return report
            if (yield {"do": "cancel_requested"}) is True:
                return (FAILED, "cancel requested before the effect")
            tries += 1
            report, retry = yield from self._perform(tries)
            if not retry or retries_left == 0:
                if report[0] == DONE:
                    yield from self._fault(AFTER_EFFECT)
                return report
            retries_left -= 1
            look_first = self.effect == "lookup"
            word, value = kind_of((yield {"do": "sleep", "ms": sleep_ms}))
            if word == TIMED_OUT:
                # Nothing was sent during the sleep: the last report stands.
                return report
            if word != SLEPT:
                report = yield from self._stopped_answer(word, value)
                return report
            sleep_ms *= 2

    def _lookup(self) -> Generator[Step, Answer, Optional[Tuple[str, Any]]]:
        """A lookup at the destination: the report, or None when nothing was found."""
        word, value = kind_of((yield {"do": "lookup"}))
        if word == FOUND:
            return (DONE, value)
        if word == NOT_FOUND:
            return None
        if word == UNAVAILABLE:
            return (NOT_SENT, f"{LOOKUP_UNAVAILABLE}: {value}")
        if word == INTERRUPTED:
            # Not retried under the claim: the time the attempt had is over.
            raise _Stop((NOT_SENT, f"{LOOKUP_UNAVAILABLE}: {_stopped(value)}"))
        report = yield from self._stopped_answer(word, value)
        raise _Stop(report)

    def _perform(self, tries: int) -> Generator[Step, Answer, Tuple[Tuple[str, Any], bool]]:
        """The effect's report and whether the kind retries it under the claim."""
        word, value = kind_of((yield {"do": "perform", "try": tries}))
        if word == DONE:
            return (DONE, value), False
        if word == NOT_SENT:
            return (NOT_SENT, value), True
        if word in (UNKNOWN, RAISED):
            return (UNKNOWN, value), self.effect in ("keyed", "lookup")
        if word == FAILED:
            return (FAILED, value), False
        if word == INTERRUPTED:
            # Celery's soft limit counts from the task's start: recorded at once.
            raise _Stop((UNKNOWN, f"the effect {_stopped(value)}"))
        report = yield from self._stopped_answer(word, value)
        raise _Stop(report)

    def _stopped_answer(self, word: str, value: Any) -> Generator[Step, Answer, Tuple[str, Any]]:
        """An effect or lookup stopped by the interpreter: the job timeout, an
        unrenewed lease (unknown, recorded at once), or a claim found gone."""
        if word == TIMED_OUT:
            return (UNKNOWN, f"timed out after {fmt_ms(int(self.job['timeout_ms']))} (the job timeout: "
                             "the whole attempt, every request in it); the effect was stopped")
        if word == LEASE_UNRENEWED:
            return (UNKNOWN, f"the lease could not be renewed ({value}); the effect was stopped before it ran out")
        if word == CLAIM_LOST:
            yield from self._lost_claim()
        raise ValueError(f"not an effect answer: {word!r}")

    # -- recording the outcome ----------------------------------------------------
    def _record(self, report: Tuple[str, Any]) -> Steps:
        what, detail = report
        if what == DONE:
            ref, result = detail.get("external_ref"), detail.get("result")
            # ``unstored``: the effect's result could not be turned into JSON
            # by the interpreter; the effect happened all the same.
            unstored = detail.get("unstored")
            text = canonical_json(result)
            if (yield self._move("complete", external_ref=ref, result=text, error=unstored)) is True:
                raise _finish("done", result=result, external_ref=ref, repeat=False)
            yield from self._completion_refused(ref, text)
        if what == NOT_SENT:
            yield from self._release_or_cancel(detail, retry_backoff_ms(self.attempt), self._looked_up(detail))
        if what == FAILED and (yield {"do": "cancel_requested"}) is True:
            yield from self._cancel_unsent(detail, self._looked_up(detail))
        if what == FAILED:
            yield from self._fenced("fail", detail)
            raise _finish("failed", error=detail)
        yield from self._unknown(detail)

    def _unknown(self, reason: str) -> Steps:
        """An unknown outcome the retries under the claim did not clear: the policy decides."""
        to = owner_move(settle(self.effect, self.on_stale, self.attempt))
        move = {State.QUEUED: "release", State.HELD: "hold", State.FAILED: "fail"}[to]
        if move != "release":
            yield from self._fenced(move, reason)
            if move == "fail":
                raise _finish("failed", error=reason)
            raise _finish("held", reason=reason)
        backoff = retry_backoff_ms(self.attempt)
        if (yield from self._release(reason, backoff)):
            raise _finish("retry_later", reason=reason, retry_after_ms=backoff)
        # A cancel was requested, but the effect may exist and there is no
        # reference to withdraw: a person must look, the request kept.
        note = f"cancel requested, but the effect's outcome is unknown ({reason}); check the destination"
        yield from self._fenced("hold", note)
        raise _finish("held", reason=note)

    def _release_or_cancel(self, reason: str, backoff: Optional[int], looked_up: bool) -> Steps:
        """Releases a claim whose effect surely did not happen (``backoff``
        None: given back unstarted, due at once); cancels it instead when a
        cancel was requested."""
        if (yield from self._release(reason, backoff)):
            raise _finish("retry_later", reason=reason, retry_after_ms=backoff or 0)
        yield from self._cancel_unsent(f"cancel requested; the effect was not sent ({reason})", looked_up)

    def _looked_up(self, reason: str) -> bool:
        """Whether a lookup under this claim found nothing before ``reason``
        (a lookup effect looks first on every claim after the first)."""
        return self.effect == "lookup" and self.attempt > 1 and not reason.startswith(LOOKUP_UNAVAILABLE)

    def _cancel_unsent(self, note: str, looked_up: bool) -> Steps:
        """A cancel was requested and this claim did not act: cancelled, or
        held when an earlier claim may have acted (protocol::cancel_unsent)."""
        if cancel_unsent(self.attempt, looked_up) is State.CANCELLED:
            yield from self._fenced("cancel_claimed", note)
            raise _finish("cancelled", withdrawn_ref=None)
        note = f"{note}; an earlier claim of this operation may have acted: check the destination"
        yield from self._fenced("hold", note)
        raise _finish("held", reason=note)

    def _release(self, reason: str, backoff: Optional[int]) -> Generator[Step, Answer, bool]:
        """Releases the claim to queued unless a cancel was requested (False:
        still ours, the cancel pending); the claim gone is the end."""
        if (yield self._move("release", error=reason, retry_after_ms=backoff)) is True:
            event = RETRY if backoff is not None else RELEASED
            yield self._audit(event, self.token, CLAIMED_STATE, QUEUED, reason,
                              attempt=self.attempt, retry_after_ms=backoff or 0)
            return True
        row = yield from self._read()
        if row["state"] == CLAIMED_STATE and row["token"] == self.token and row["cancel_requested"]:
            return False
        yield from self._lost(row)

    def _fenced(self, move: str, reason: str) -> Steps:
        """The owner's move (fail, hold or cancel), or the claim lost."""
        if (yield self._move(move, error=reason)) is not True:
            yield from self._lost_claim()
        yield self._audit(_FENCED_EVENT[move], self.token, CLAIMED_STATE, _to(move), reason)

    def _completion_refused(self, ref: Optional[str], text: str) -> Steps:
        """The completion changed nothing: a cancel came while the effect ran
        (withdraw it), or the claim is gone."""
        row = yield from self._read()
        if not (row["state"] == CLAIMED_STATE and row["token"] == self.token and row["cancel_requested"]):
            yield from self._lost(row)
        if ref is None:
            error: Optional[str] = "the effect returned no reference to withdraw"
        else:
            word, why = kind_of((yield {"do": "withdraw", "external_ref": ref}))
            error = None if word == WITHDRAWN else why
        if error is None:
            move, event = "cancel_claimed", COMPENSATED
            note = "cancel requested while the effect ran; withdrawn at the destination"
        else:
            move, event = "complete_withdraw_failed", WITHDRAW_FAILED
            note = (f"cancel requested while the effect ran, but the withdraw failed ({error}); "
                    "the item is live at the destination")
        if (yield self._move(move, external_ref=ref, result=text, error=note)) is not True:
            yield from self._lost_claim()
        yield self._audit(event, self.token, CLAIMED_STATE, _to(move), note)
        if error is None:
            raise _finish("cancelled", withdrawn_ref=ref)
        raise _finish("withdraw_failed", external_ref=ref, error=error)

    # -- local effects ------------------------------------------------------------
    def _local(self, fingerprint: str) -> Steps:
        word, found = kind_of((yield {"do": "claim"}))
        if word != CLAIMED:
            # A local claim outlives its transaction only if effect kinds were
            # mixed on one job type: a person must look.
            raise self._in_progress_stale(self._decide(found, fingerprint))
        self._hold(found)
        yield from self._fault(AFTER_CLAIM)
        word, value = kind_of((yield {"do": "perform", "try": 1}))
        if word == TIMED_OUT:
            raise _error("timeout", timeout_ms=self.job["timeout_ms"])
        if word == CLAIM_LOST:
            raise _error("local_effect_failed", why="the claim was lost")
        if word != DONE:
            raise _error("local_effect_failed", why=value)
        yield from self._fault(AFTER_EFFECT)
        result = value.get("result")
        if (yield self._move("complete", result=canonical_json(result))) is True:
            raise _finish("done", result=result, external_ref=None, repeat=False)
        # Refused: its transaction rolls back, with any audit row appended in it.
        row = yield {"do": "read"}
        if row is None:
            raise _error("not_found")
        raise _error("lost_claim", token=self.token, row=row)

    # -- steps --------------------------------------------------------------------
    def _fault(self, point: str) -> Steps:
        if (yield {"do": "fault", "point": point}) == CRASH:
            raise _error("injected_crash", point=point)

    def _read(self) -> Generator[Step, Answer, Row]:
        row = yield {"do": "read"}
        if row is None:
            raise _error("not_found")
        return row

    def _lost_claim(self) -> Steps:
        """The claim turned out gone: read the row, and end with it."""
        row = yield from self._read()
        yield from self._lost(row)

    def _lost(self, row: Row) -> Steps:
        detail = f"the row is now {row['state']} with token {row['token']} (owner {row.get('owner') or '-'})"
        yield self._audit(LOST_CLAIM, self.token, CLAIMED_STATE, row["state"], detail)
        raise _error("lost_claim", token=self.token, row=row)

    def _move(self, move: str, external_ref: Optional[str] = None, result: Optional[str] = None,
              error: Optional[str] = None, retry_after_ms: Optional[int] = None) -> Step:
        return {"do": "move", "move": move, "token": self.token, "external_ref": external_ref,
                "result": result, "error": error, "retry_after_ms": retry_after_ms}

    @staticmethod
    def _audit(event: str, token: int, from_state: str, to: str, detail: str,
               attempt: Optional[int] = None, retry_after_ms: Optional[int] = None) -> Step:
        return {"do": "audit", "event": event, "token": token, "from": from_state, "to": to,
                "detail": detail, "attempt": attempt, "retry_after_ms": retry_after_ms}


class _Stop(Exception):
    """An attempt stopped (interrupted, timed out, its lease unrenewed):
    recorded at once, never retried under the claim."""

    def __init__(self, report: Tuple[str, Any]):
        super().__init__(report[1])
        self.report = report


def _stopped(what: Any) -> str:
    return f"was stopped at the time limit ({what})"


def _within_answer_rules(report: Tuple[str, Any]) -> Tuple[str, Any]:
    """A done answer whose reference or result breaks the answer rules broke
    the protocol, as a 2xx without an id does: failed for good, nothing stored."""
    why = answer_rules.broken(report[1].get("external_ref"), canonical_json(report[1].get("result")))
    return report if why is None else (FAILED, why)


def _stored_value(text: Optional[str]) -> Any:
    """A stored result's JSON text as a value (None when there is none or it is not JSON)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _or(value: Optional[int], default: int) -> int:
    return default if value is None else value
