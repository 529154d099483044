"""The guard: claim, act, then complete, release or fail, each write fenced by
the claim's token, following crates/onceonly/src/guard (same transitions,
same audit events, same decisions)."""
from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
from typing import Any, Callable, Optional, Tuple, Type, Union

from . import answer
from .canonical import Payload, canonical_json
from .effect import EffectCtx, NotSent, OutcomeUnknown, PermanentFailure, Sent
from .errors import (EffectTimeout, InjectedCrash, InvalidInput, InvalidPayload, LocalEffectFailed,
                     LostClaim, NotFound, PayloadMismatch)
from .keys import idempotency_key, validate_op_key
from .local import transaction
from .outcome import (Cancelled, Done, Failed, Held, InProgress, NotDue, Outcome, RetryLater,
                      WithdrawFailed)
from .owner import new_owner
from .protocol import (CANCELLED, COMPENSATED, FAILED, HOLD_EVENT, LOST_CLAIM, RETRY, TAKE_OVER,
                       WITHDRAW_FAILED, cancel_unsent, owner_move, owner_op, policy, take_over_to)
from .record import Claim, Record, Snapshot, State
from .spec import JobSpec, Kind, StalePolicy, fmt_ms
from .stores import OpMove, Store

log = logging.getLogger("onceonly")

AFTER_CLAIM = "after_claim"
AFTER_EFFECT = "after_effect"

# What an effect reported, before it is recorded.
_DONE, _NOT_SENT, _UNKNOWN, _FAILED = "done", "not_sent", "unknown", "failed"
LOOKUP_UNAVAILABLE = "lookup unavailable"
Report = Tuple[str, Any]

Perform = Callable[[EffectCtx], Any]
Lookup = Callable[[EffectCtx], Optional[Sent]]
Withdraw = Callable[[EffectCtx, str], None]


def retry_backoff_ms(attempt: int) -> int:
    """500ms after the first claim, doubling per claim, at most a minute (as Rust)."""
    doublings = min(max(attempt - 1, 0), 7)
    return min(500 * 2**doublings, 60_000)


def _result_text(result: Any) -> str:
    return canonical_json(result)


def _storable(result: Any) -> Tuple[Optional[str], Optional[str]]:
    """(result JSON, None), or (None, why) for a result that is not JSON: the
    effect happened all the same, and its completion must be recorded."""
    try:
        return _result_text(result), None
    except InvalidPayload as e:
        return None, f"the effect's result was not stored: {e}"


class Guard:
    """Guards one job type's effect on ``store``. Refuses a spec that breaks a timing rule.

    ``fault_hook(point)`` is called at ``after_claim`` and ``after_effect``
    (tests, replay); returning ``"crash"`` stops there as if the process died.
    ``interrupts``: exception types that mean the attempt was stopped from
    outside (Celery's ``SoftTimeLimitExceeded``): the outcome is recorded at
    once, never retried under the claim, and a local effect's transaction is
    rolled back and the exception raised again.
    """

    def __init__(self, store: Store, spec: JobSpec, owner: Optional[str] = None,
                 fault_hook: Optional[Callable[[str], Optional[str]]] = None,
                 interrupts: Tuple[Type[BaseException], ...] = ()):
        spec.validate()
        self.store, self.spec, self.fault_hook = store, spec, fault_hook
        self.interrupts = tuple(interrupts)
        self._owner, self._owner_pid = owner, os.getpid() if owner else None

    @property
    def owner(self) -> str:
        """The owner written on claims; a forked worker process gets its own."""
        if self._owner is None or self._owner_pid != os.getpid():
            self._owner, self._owner_pid = new_owner(), os.getpid()
        return self._owner

    # -- a delivery ---------------------------------------------------------------
    def run(self, op_key: str, payload: Payload, perform: Perform,
            lookup: Optional[Lookup] = None, withdraw: Optional[Withdraw] = None) -> Outcome:
        """Runs one delivery: claims the operation, performs the effect if the
        claim is ours, and records the outcome under the claim's token.

        A repeat gets the stored result without acting; a live claim of another
        worker is left alone (:class:`InProgress`); a claim past its lease is
        handled by the effect kind and stale-claim policy. Raises
        :class:`PayloadMismatch` when the key is stored with another payload and
        :class:`LostClaim` when the claim was taken away before it could record.
        """
        if self.spec.effect is Kind.LOCAL:
            raise InvalidInput("a local effect runs in the caller's transaction: use run_local")
        validate_op_key(op_key)
        spec = self.spec
        found = self.store.claim(spec.job_type, op_key, self.owner, payload, spec.lease_ms)
        stale_before = False
        if isinstance(found, Snapshot):
            decided = self._decide(found, payload)
            if isinstance(decided, Outcome):
                return decided
            claim = self._take_over(decided)
            if claim is None:
                return self._settled_after_race(op_key, payload)
            found, stale_before = claim, True
        ctx = self._ctx(op_key, found, payload)
        report = self._perform(ctx, found, stale_before, perform, lookup)
        return self._record(ctx, report, withdraw)

    def _ctx(self, op_key: str, claim: Claim, payload: Payload, conn: Any = None) -> EffectCtx:
        return EffectCtx(
            job_type=self.spec.job_type, op_key=op_key,
            idempotency_key=idempotency_key(self.spec.job_type, op_key),
            token=claim.token, attempt=claim.attempts, payload=payload.value(),
            deadline=time.monotonic() + self.spec.timeout_ms / 1000, conn=conn,
        )

    def _decide(self, snap: Snapshot, payload: Payload) -> Union[Outcome, Record]:
        """What an existing row means for this delivery: an outcome, or the stale record to take over."""
        r = snap.record
        if r.fingerprint != payload.fingerprint:
            raise PayloadMismatch(r.job_type, r.op_key, r.fingerprint, payload.fingerprint)
        if r.state is State.COMPLETED:
            return Done(r.result_value(), r.external_ref, repeat=True)
        if r.state is State.FAILED:
            return Failed(r.error)
        if r.state is State.CANCELLED:
            return Cancelled(None)
        if r.state is State.HELD:
            return Held(r.error)
        if r.state is State.QUEUED:
            return NotDue(r.due_at, snap.now)
        if r.lease_expired(snap.now):
            return r
        claimed_at = r.claimed_at if r.claimed_at is not None else snap.now
        lease_until = r.lease_until if r.lease_until is not None else snap.now
        return InProgress(max(snap.now - claimed_at, 0), max(lease_until - claimed_at, 0), r.owner)

    def _take_over(self, stale: Record) -> Optional[Claim]:
        """Takes over a stale claim as the policy says; a claim only when this worker must act."""
        who = stale.owner or "?"
        to = take_over_to(policy(self.spec.effect, self.spec.on_stale, stale.attempts))
        if to is State.CLAIMED:
            reason = f"took over a claim of {who} past its lease"
        elif to is State.FAILED:
            reason = "claim went past its lease; given up under at-most-once (the effect may be missing)"
        elif self.spec.on_stale is StalePolicy.AT_LEAST_ONCE:
            reason = "a redo under at-least-once also went past its lease; held to keep to one extra"
        else:
            reason = f"claim by {who} went past its lease; the effect may or may not have happened"
        taken = self.store.take_over(stale.job_type, stale.op_key, stale.token, to, self.owner, self.spec.lease_ms, reason)
        log.info("stale claim job=%s key=%s stale_token=%s to=%s won=%s", stale.job_type, stale.op_key, stale.token, to, taken is not None)
        if taken is not None:
            self._audit(stale.op_key, TAKE_OVER, taken.token, State.CLAIMED, to, f"stale token {stale.token}: {reason}")
        return taken if taken is not None and to is State.CLAIMED else None

    def _settled_after_race(self, op_key: str, payload: Payload) -> Outcome:
        snap = self._get(op_key)
        decided = self._decide(snap, payload)
        if isinstance(decided, Outcome):
            return decided
        claimed_at = decided.claimed_at if decided.claimed_at is not None else snap.now
        return InProgress(max(snap.now - claimed_at, 0), self.spec.lease_ms, decided.owner)

    # -- acting under the claim ---------------------------------------------------
    def _perform(self, ctx: EffectCtx, claim: Claim, after_stale: bool, perform: Perform,
                 lookup: Optional[Lookup]) -> Report:
        self._fault(AFTER_CLAIM)
        beat = _Heartbeat(self, ctx) if self.spec.heartbeat_ms else None
        try:
            try:
                report = self._attempts(ctx, claim, after_stale, perform, lookup)
            finally:
                if beat:
                    beat.stop()
        except _EffectStopped:  # raised by the heartbeat; beat.lost is raised below
            report = (_UNKNOWN, beat.unrenewed)
        except _Interrupted as stopped:
            report = stopped.report
        if beat and beat.lost is not None:
            raise beat.lost
        return report

    def _attempts(self, ctx: EffectCtx, claim: Claim, after_stale: bool, perform: Perform,
                  lookup: Optional[Lookup]) -> Report:
        kind = self.spec.effect
        look_first = kind is Kind.LOOKUP and (after_stale or claim.attempts > 1)
        retries_left, backoff = self.spec.max_retries, 0.02
        while True:
            if look_first:
                try:
                    found = lookup(ctx) if lookup else None
                    if lookup is None:
                        return (_NOT_SENT, f"{LOOKUP_UNAVAILABLE}: this effect has no lookup")
                except self.interrupts as e:
                    raise _Interrupted((_NOT_SENT, f"{LOOKUP_UNAVAILABLE}: {_stopped(e)}")) from e
                except Exception as e:  # the destination could not say
                    return (_NOT_SENT, f"{LOOKUP_UNAVAILABLE}: {e}")
                if found is not None:
                    return (_DONE, found if isinstance(found, Sent) else Sent(None, found))
            if ctx.cancel_requested():
                return (_FAILED, "cancel requested before the effect")
            report = self._call(perform, ctx)
            retry = report[0] == _NOT_SENT or (report[0] == _UNKNOWN and kind in (Kind.KEYED, Kind.LOOKUP))
            if not retry or retries_left == 0:
                if report[0] == _DONE:
                    self._fault(AFTER_EFFECT)
                return report
            log.debug("retrying under the claim job=%s key=%s report=%s", ctx.job_type, ctx.op_key, report)
            retries_left -= 1
            look_first = kind is Kind.LOOKUP
            time.sleep(backoff)
            backoff *= 2
            if ctx.remaining() == 0:
                # Rust's job timeout bounds the retries too (timeout < lease):
                # none starts after it, so none runs once the claim may be taken over.
                return report

    def _call(self, perform: Perform, ctx: EffectCtx) -> Report:
        try:
            value = perform(ctx)
        except NotSent as e:
            return (_NOT_SENT, e.reason)
        except PermanentFailure as e:
            return (_FAILED, e.reason)
        except OutcomeUnknown as e:
            return (_UNKNOWN, e.reason)
        except (InjectedCrash, LostClaim):
            raise
        except self.interrupts as e:
            # Not retried here: the time the attempt had is over (Celery's soft
            # limit counts from the task's start, so it can come before ctx's
            # deadline); the next claim redoes it if the kind allows.
            raise _Interrupted((_UNKNOWN, f"the effect {_stopped(e)}")) from e
        except Exception as e:  # it may have acted before it raised
            return (_UNKNOWN, f"the effect raised {type(e).__name__}: {e}")
        if ctx.remaining() == 0:  # it acted, late: recorded all the same (the fenced write decides)
            log.warning("effect of %s:%s returned after the job timeout (%s)", ctx.job_type, ctx.op_key, fmt_ms(self.spec.timeout_ms))
        return (_DONE, value if isinstance(value, Sent) else Sent(None, value))

    # -- recording the outcome ----------------------------------------------------
    def _record(self, ctx: EffectCtx, report: Report, withdraw: Optional[Withdraw]) -> Outcome:
        what, detail = report
        if what == _DONE:
            sent: Sent = detail
            text, unstored = _storable(sent.result)
            # An answer that breaks the answer rules broke the protocol, as a
            # 2xx without an id does: failed for good, nothing of it stored.
            why = answer.broken(sent.external_ref, text)
            if why is not None:
                return self._record(ctx, (_FAILED, why), withdraw)
            if unstored:
                log.warning("%s:%s: %s", ctx.job_type, ctx.op_key, unstored)
            p = self._move(ctx, "complete", external_ref=sent.external_ref, result=text, error=unstored)
            if self.store.move(p):
                return Done(None if text is None else json.loads(text), sent.external_ref, repeat=False)
            return self._completion_refused(ctx, sent, text, withdraw)
        if what == _NOT_SENT:
            released = self._release(ctx, detail)
            if released:
                return RetryLater(detail, retry_backoff_ms(ctx.attempt))
            note = f"cancel requested; the effect was not sent ({detail})"
            return self._cancel_unsent(ctx, note, self._looked_up(ctx, detail))
        if what == _FAILED and ctx.cancel_requested():
            return self._cancel_unsent(ctx, detail, self._looked_up(ctx, detail))
        if what == _FAILED:
            self._fenced(ctx, State.FAILED, detail)
            return Failed(detail)
        return self._unknown(ctx, detail)

    def _looked_up(self, ctx: EffectCtx, reason: str) -> bool:
        """Whether a lookup under this claim found nothing before ``reason``
        (a lookup effect looks first on every claim after the first)."""
        return (self.spec.effect is Kind.LOOKUP and ctx.attempt > 1
                and not reason.startswith(LOOKUP_UNAVAILABLE))

    def _cancel_unsent(self, ctx: EffectCtx, note: str, looked_up: bool) -> Outcome:
        """A cancel was requested and this claim did not act: cancelled, or held
        (the request kept) when an earlier claim may have acted."""
        if cancel_unsent(ctx.attempt, looked_up) is State.CANCELLED:
            self._fenced(ctx, State.CANCELLED, note)
            return Cancelled(None)
        note = f"{note}; an earlier claim of this operation may have acted: check the destination"
        self._fenced(ctx, State.HELD, note)
        return Held(note)

    def _unknown(self, ctx: EffectCtx, reason: str) -> Outcome:
        to = owner_move(policy(self.spec.effect, self.spec.on_stale, ctx.attempt))
        if to is not State.QUEUED:
            self._fenced(ctx, to, reason)
            return Failed(reason) if to is State.FAILED else Held(reason)
        if self._release(ctx, reason):
            return RetryLater(reason, retry_backoff_ms(ctx.attempt))
        note = f"cancel requested, but the effect's outcome is unknown ({reason}); check the destination"
        self._fenced(ctx, State.HELD, note)
        return Held(note)

    def _move(self, ctx: EffectCtx, name: str, **fields) -> OpMove:
        return owner_op(name, ctx.job_type, ctx.op_key, ctx.token, **fields)

    def _release(self, ctx: EffectCtx, reason: str) -> bool:
        """Releases the claim to queued unless a cancel is pending (False: still ours, cancel pending)."""
        backoff_ms = retry_backoff_ms(ctx.attempt)
        p = self._move(ctx, "release", error=reason, retry_after_ms=backoff_ms)
        if self.store.move(p):
            self._audit(ctx.op_key, RETRY, ctx.token, State.CLAIMED, State.QUEUED, reason,
                        attempt=ctx.attempt, retry_after_ms=backoff_ms)
            return True
        r = self._get(ctx.op_key).record
        if r.state is State.CLAIMED and r.token == ctx.token and r.cancel_requested:
            return False
        raise self._lost(ctx.token, r)

    def _fenced(self, ctx: EffectCtx, to: State, reason: str) -> None:
        name = {State.HELD: "hold", State.CANCELLED: "cancel_claimed", State.FAILED: "fail"}[to]
        if not self.store.move(self._move(ctx, name, error=reason)):
            raise self._lost(ctx.token, self._get(ctx.op_key).record)
        event = {State.HELD: HOLD_EVENT, State.CANCELLED: CANCELLED}.get(to, FAILED)
        self._audit(ctx.op_key, event, ctx.token, State.CLAIMED, to, reason)

    def _completion_refused(self, ctx: EffectCtx, sent: Sent, text: Optional[str], withdraw: Optional[Withdraw]) -> Outcome:
        """The completion changed nothing: a cancel came while the effect ran (withdraw), or the claim is gone."""
        r = self._get(ctx.op_key).record
        if not (r.state is State.CLAIMED and r.token == ctx.token and r.cancel_requested):
            raise self._lost(ctx.token, r)
        error = None
        if sent.external_ref is None:
            error = "the effect returned no reference to withdraw"
        elif withdraw is None:
            error = "this effect cannot be withdrawn"
        else:
            try:
                if withdraw(ctx, sent.external_ref) is False:  # an explicit no, as Ruby reads a falsy answer
                    error = "the destination did not confirm the withdraw"
            except Exception as e:
                error = str(e) or type(e).__name__
        if error is None:
            to, event = State.CANCELLED, COMPENSATED
            note = "cancel requested while the effect ran; withdrawn at the destination"
            outcome: Outcome = Cancelled(sent.external_ref)
        else:
            to, event = State.COMPLETED, WITHDRAW_FAILED
            note = (f"cancel requested while the effect ran, but the withdraw failed ({error}); "
                    "the item is live at the destination")
            outcome = WithdrawFailed(sent.external_ref, error)
        log.warning("compensation job=%s key=%s: %s", ctx.job_type, ctx.op_key, note)
        name = "cancel_claimed" if to is State.CANCELLED else "complete_withdraw_failed"
        p = self._move(ctx, name, external_ref=sent.external_ref, result=text, error=note)
        if not self.store.move(p):
            raise self._lost(ctx.token, self._get(ctx.op_key).record)
        self._audit(ctx.op_key, event, ctx.token, State.CLAIMED, to, note)
        return outcome

    # -- local effects ------------------------------------------------------------
    def run_local(self, conn: Any, op_key: str, payload: Payload,
                  effect: Callable[[Any, EffectCtx], Any]) -> Outcome:
        """Claim, ``effect(conn, ctx)`` and completion in one transaction on the
        user's connection (sqlite3, psycopg or a SQLAlchemy session). If the
        effect raises or overruns the job timeout, everything rolls back and
        nothing is recorded."""
        if self.spec.effect is not Kind.LOCAL:
            raise InvalidInput(f"run_local is for local effects; this job's effect is {self.spec.kind_name}")
        validate_op_key(op_key)
        from .local import dialect_of

        if dialect_of(conn) != self.store.dialect:  # refuse a foreign connection before anything runs
            raise InvalidInput(f"this job's records are on {self.store.dialect}; the connection given is {dialect_of(conn)}")
        with transaction(conn):
            found = self.store.claim_in(conn, self.spec.job_type, op_key, self.owner, payload, self.spec.lease_ms)
            if isinstance(found, Snapshot):
                return self._local_settled(found, payload)
            ctx = self._ctx(op_key, found, payload, conn)
            self._fault(AFTER_CLAIM)
            started = time.monotonic()
            try:
                result = effect(conn, ctx)
            except (InjectedCrash, LostClaim) + self.interrupts:
                raise
            except Exception as e:
                raise LocalEffectFailed(
                    f"local effect of {self.spec.job_type}:{op_key} failed, its transaction rolled back: "
                    f"{type(e).__name__}: {e}") from e
            if time.monotonic() - started > self.spec.timeout_ms / 1000:
                raise EffectTimeout(f"local effect of {self.spec.job_type}:{op_key} ran past the job timeout "
                                    f"({fmt_ms(self.spec.timeout_ms)}); its transaction rolled back")
            self._fault(AFTER_EFFECT)
            text = _result_text(result)
            p = owner_op("complete", self.spec.job_type, op_key, found.token, result=text)
            if not self.store.move(p, conn=conn):
                snap = self.store.get(self.spec.job_type, op_key, conn=conn)
                if snap is None:
                    raise NotFound(self.spec.job_type, op_key)
                raise LostClaim(found.token, snap.record)
            return Done(json.loads(text), None, repeat=False)

    def _local_settled(self, snap: Snapshot, payload: Payload) -> Outcome:
        decided = self._decide(snap, payload)
        if isinstance(decided, Outcome):
            return decided
        # A local claim outlives its transaction only if effect kinds were mixed
        # on one job type: a person must look.
        claimed_at = decided.claimed_at if decided.claimed_at is not None else snap.now
        return InProgress(max(snap.now - claimed_at, 0), self.spec.lease_ms, decided.owner)

    # -- helpers ------------------------------------------------------------------
    def _get(self, op_key: str) -> Snapshot:
        snap = self.store.get(self.spec.job_type, op_key)
        if snap is None:
            raise NotFound(self.spec.job_type, op_key)
        return snap

    def _fault(self, point: str) -> None:
        if self.fault_hook is not None and self.fault_hook(point) == "crash":
            raise InjectedCrash(point)

    def _audit(self, op_key: str, event: str, token: int, from_state: State, to: State, detail: str,
               attempt: Optional[int] = None, retry_after_ms: Optional[int] = None) -> None:
        """Appends an event (one of protocol.AUDIT_EVENTS) after the write that made it; a failed
        append is logged, never raised."""
        try:
            self.store.audit(self.spec.job_type, op_key, event, self.owner, token, from_state, to, detail,
                             attempt=attempt, retry_after_ms=retry_after_ms)
        except Exception as e:
            log.warning("audit append failed; the transition itself stands job=%s key=%s event=%s: %s",
                        self.spec.job_type, op_key, event, e)

    def _lost(self, token: int, record: Record) -> LostClaim:
        detail = f"the row is now {record.state} with token {record.token} (owner {record.owner or '-'})"
        self._audit(record.op_key, LOST_CLAIM, token, State.CLAIMED, record.state, detail)
        return LostClaim(token, record)


def _stopped(e: BaseException) -> str:
    return f"was stopped at the time limit ({type(e).__name__})"


class _Interrupted(Exception):
    """Carries the report of an attempt stopped by one of the guard's interrupts."""

    def __init__(self, report: Report):
        super().__init__(report[1])
        self.report = report


class _EffectStopped(BaseException):
    """Raised in the effect's thread by its heartbeat when the claim was lost or
    its lease could not be renewed: not an Exception, so an effect's
    ``except Exception`` cannot swallow it."""


class _Heartbeat:
    """Renews the lease every heartbeat interval while the effect runs, and
    carries the operator's cancel request to the effect's context. When the
    claim is gone, or its lease can no longer be renewed before it runs out, it
    stops the effect (as Rust drops it), so it never acts after another worker
    could take over."""

    def __init__(self, guard: Guard, ctx: EffectCtx):
        self.guard, self.ctx = guard, ctx
        self.lost: Optional[LostClaim] = None
        self.unrenewed: Optional[str] = None
        self._worker = threading.get_ident()
        self._lock = threading.Lock()
        self._stopped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="onceonly-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        g, ctx, interval = self.guard, self.ctx, self.guard.spec.heartbeat_ms / 1000
        # The claim was taken about now; the effect must not go on past a lease
        # that could not be renewed.
        renewed = time.monotonic()
        while not self._stop.wait(interval):
            if ctx.remaining() == 0:
                # Timed out: Rust stops the effect and its heartbeat here. A thread
                # cannot be stopped, so its claim is left to run out and go stale.
                return
            try:
                beat = g.store.heartbeat(ctx.job_type, ctx.op_key, ctx.token, g.spec.lease_ms)
            except Exception as e:
                if time.monotonic() - renewed + interval >= g.spec.lease_ms / 1000:
                    log.warning("lease not renewed; stopping the effect job=%s key=%s: %s", ctx.job_type, ctx.op_key, e)
                    self._stop_effect(f"the lease could not be renewed ({e}); the effect was stopped before it ran out")
                    return
                log.warning("heartbeat failed; will retry job=%s key=%s: %s", ctx.job_type, ctx.op_key, e)
                continue
            if beat is None:
                self.lost = g._lost(ctx.token, g._get(ctx.op_key).record)
                self._stop_effect("the claim was lost")
                return
            renewed = time.monotonic()
            if beat[1]:
                ctx._cancel.set()

    def _stop_effect(self, why: str) -> None:
        """Raises _EffectStopped in the effect's thread, unless it already ended.
        It lands at the thread's next Python instruction (a call blocked in C,
        such as a socket read, is stopped when it returns)."""
        with self._lock:
            if self._stopped:
                return
            self.unrenewed = why
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._worker), ctypes.py_object(_EffectStopped))

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._stop.set()
        self._thread.join()
