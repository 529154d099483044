"""The guard: the interpreter of the decisions machine (:mod:`onceonly.decide`,
ported from crates/onceonly/src/protocol/decide.rs). The machine decides every
step (claim, take-over, effect, retries under the claim, which move, which
audit event, which outcome); this shell only does the I/O: the store's
statements, the effect within its deadline and heartbeat, the sleeps, the
audit appends, the interrupts, the fault hook, and local effects in the
user's transaction."""
from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Type

from .canonical import Payload, canonical_json
from .decide import AFTER_CLAIM, AFTER_EFFECT, LOOKUP_UNAVAILABLE, Decider, Step, retry_backoff_ms
from .effect import EffectCtx, NotSent, OutcomeUnknown, PermanentFailure, Sent
from .errors import (EffectTimeout, InjectedCrash, InvalidInput, InvalidPayload, LocalEffectFailed,
                     LostClaim, NotFound, OnceonlyError, PayloadMismatch)
from .keys import idempotency_key, validate_op_key
from .local import transaction
from .outcome import (Cancelled, Done, Failed, Held, InProgress, NotDue, Outcome, RetryLater,
                      WithdrawFailed)
from .owner import new_owner
from .protocol import owner_op, take_over_to
from .record import Claim, Snapshot, State
from .spec import JobSpec, Kind, fmt_ms
from .stores import Store

__all__ = ["Guard", "AFTER_CLAIM", "AFTER_EFFECT", "LOOKUP_UNAVAILABLE", "retry_backoff_ms"]

log = logging.getLogger("onceonly")

Perform = Callable[[EffectCtx], Any]
Lookup = Callable[[EffectCtx], Optional[Sent]]
Withdraw = Callable[[EffectCtx, str], None]

# The steps taken while the effect's attempts run: the heartbeat renews the
# lease through them, and stops at the first other step.
_ACTING = frozenset({"cancel_requested", "lookup", "perform", "sleep", "fault"})


@dataclass
class _Delivery:
    """What the shell holds while it drives the machine through one delivery."""

    op_key: str
    payload: Payload
    perform: Optional[Perform] = None
    lookup: Optional[Lookup] = None
    withdraw: Optional[Withdraw] = None
    local: Optional[Callable[[Any, EffectCtx], Any]] = None
    conn: Any = None  # the user's connection (local effects)
    ctx: Optional[EffectCtx] = None  # set when a claim is ours
    snap: Optional[Snapshot] = None  # the row last answered (claim, read)
    beat: Optional["_Heartbeat"] = None
    acted: bool = False  # the attempts are over: no heartbeat again
    raised: Optional[BaseException] = None  # what a local effect raised


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
        d = _Delivery(op_key, payload, perform=perform, lookup=lookup, withdraw=withdraw)
        return self._drive(Decider(self.job(), {"entry": "run", "fingerprint": payload.fingerprint}), d)

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
        d = _Delivery(op_key, payload, local=effect, conn=conn)
        with transaction(conn):
            return self._drive(Decider(self.job(), {"entry": "local", "fingerprint": payload.fingerprint}), d)

    def job(self) -> Dict[str, Any]:
        """The job as the decisions machine reads it."""
        spec = self.spec
        return {"effect": spec.effect.value,
                "on_stale": spec.on_stale.value.replace("-", "_") if spec.effect is Kind.OPAQUE else None,
                "max_retries": spec.max_retries, "lease_ms": spec.lease_ms, "timeout_ms": spec.timeout_ms}

    # -- the interpreter ----------------------------------------------------------
    def _drive(self, machine: Decider, d: _Delivery) -> Outcome:
        """Runs the machine's steps until it ends: the outcome, or the error raised."""
        answer: Any = None
        try:
            while True:
                step = machine.next(answer)
                do = step["do"]
                if d.beat is not None and do not in _ACTING:
                    self._attempts_over(d)
                if do == "finish":
                    return self._outcome(step["outcome"], d)
                if do == "error":
                    raise self._error(step["error"], d)
                answer = self._STEPS[do](self, step, d)
        finally:
            self._attempts_over(d)

    def _claim(self, step: Step, d: _Delivery) -> Any:
        spec = self.spec
        if d.conn is not None:
            found = self.store.claim_in(d.conn, spec.job_type, d.op_key, self.owner, d.payload, spec.lease_ms)
        else:
            found = self.store.claim(spec.job_type, d.op_key, self.owner, d.payload, spec.lease_ms)
        if isinstance(found, Snapshot):
            d.snap = found
            return {"existing": _row(found)}
        return self._claimed(found, d)

    def _take_over(self, step: Step, d: _Delivery) -> Any:
        spec, to = self.spec, take_over_to(step["settle"])
        taken = self.store.take_over(spec.job_type, d.op_key, step["stale_token"], to, self.owner,
                                     spec.lease_ms, step["reason"])
        log.info("stale claim job=%s key=%s stale_token=%s to=%s won=%s",
                 spec.job_type, d.op_key, step["stale_token"], to, taken is not None)
        return None if taken is None else self._claimed(taken, d)["claimed"]

    def _claimed(self, claim: Claim, d: _Delivery) -> Dict[str, Any]:
        d.ctx = EffectCtx(
            job_type=self.spec.job_type, op_key=d.op_key,
            idempotency_key=idempotency_key(self.spec.job_type, d.op_key),
            token=claim.token, attempt=claim.attempts, payload=d.payload.value(),
            deadline=time.monotonic() + self.spec.timeout_ms / 1000, conn=d.conn,
        )
        return {"claimed": {"token": claim.token, "attempts": claim.attempts}}

    def _read(self, step: Step, d: _Delivery) -> Any:
        d.snap = self.store.get(self.spec.job_type, d.op_key, conn=d.conn)
        return None if d.snap is None else _row(d.snap)

    def _move(self, step: Step, d: _Delivery) -> bool:
        p = owner_op(step["move"], self.spec.job_type, d.op_key, step["token"],
                     external_ref=step["external_ref"], result=step["result"], error=step["error"],
                     retry_after_ms=step["retry_after_ms"])
        if step["move"] in ("cancel_claimed", "complete_withdraw_failed") and step["external_ref"] is not None:
            log.warning("compensation job=%s key=%s: %s", self.spec.job_type, d.op_key, step["error"])
        return self.store.move(p, conn=d.conn) if d.conn is not None else self.store.move(p)

    def _audit(self, step: Step, d: _Delivery) -> None:
        """Appends an event (one of protocol.AUDIT_EVENTS) after the write that made it; a failed
        append is logged, never raised."""
        try:
            self.store.audit(self.spec.job_type, d.op_key, step["event"], self.owner, step["token"],
                             State(step["from"]), State(step["to"]), step["detail"],
                             attempt=step["attempt"], retry_after_ms=step["retry_after_ms"])
        except Exception as e:
            log.warning("audit append failed; the transition itself stands job=%s key=%s event=%s: %s",
                        self.spec.job_type, d.op_key, step["event"], e)
        return None

    def _fault(self, step: Step, d: _Delivery) -> str:
        if self.fault_hook is not None and self.fault_hook(step["point"]) == "crash":
            return "crash"
        return "continue"

    def _cancel_requested(self, step: Step, d: _Delivery) -> bool:
        self._attempts_start(d)
        return d.ctx.cancel_requested()

    def _perform(self, step: Step, d: _Delivery) -> Any:
        if d.local is not None:
            return self._perform_local(d)
        self._attempts_start(d)
        if d.beat is not None and d.beat.answer is not None:
            return d.beat.answer  # stopped while no effect ran: it is not called
        try:
            with d.beat.effect_running() if d.beat is not None else nullcontext():
                value = d.perform(d.ctx)
        except _EffectStopped:
            return d.beat.answer
        except NotSent as e:
            return {"not_sent": e.reason}
        except PermanentFailure as e:
            return {"failed": e.reason}
        except OutcomeUnknown as e:
            return {"unknown": e.reason}
        except (InjectedCrash, LostClaim):
            raise
        except self.interrupts as e:
            # Recorded at once (Celery's soft limit counts from the task's
            # start, so it can come before ctx's deadline).
            return {"interrupted": type(e).__name__}
        except Exception as e:  # it may have acted before it raised
            return {"unknown": f"the effect raised {type(e).__name__}: {e}"}
        if d.ctx.remaining() == 0:  # it acted, late: recorded all the same (the fenced write decides)
            log.warning("effect of %s:%s returned after the job timeout (%s)",
                        d.ctx.job_type, d.ctx.op_key, fmt_ms(self.spec.timeout_ms))
        return {"done": self._sent(value, d)}

    def _perform_local(self, d: _Delivery) -> Any:
        started = time.monotonic()
        try:
            value = d.local(d.conn, d.ctx)
        except (InjectedCrash, LostClaim) + self.interrupts:
            raise
        except Exception as e:
            d.raised = e
            return {"raised": f"{type(e).__name__}: {e}"}
        if time.monotonic() - started > self.spec.timeout_ms / 1000:
            return "timed_out"
        return {"done": {"result": json.loads(canonical_json(value))}}  # refuses a result that is not JSON

    def _lookup(self, step: Step, d: _Delivery) -> Any:
        self._attempts_start(d)
        if d.lookup is None:
            return {"unavailable": "this effect has no lookup"}
        if d.beat is not None and d.beat.answer is not None:
            return d.beat.answer
        try:
            with d.beat.effect_running() if d.beat is not None else nullcontext():
                found = d.lookup(d.ctx)
        except _EffectStopped:
            return d.beat.answer
        except self.interrupts as e:
            return {"interrupted": type(e).__name__}
        except Exception as e:  # the destination could not say
            return {"unavailable": str(e)}
        if found is None:
            return "not_found"
        return {"found": self._sent(found, d)}

    def _sent(self, value: Any, d: _Delivery) -> Dict[str, Any]:
        """What a done effect (or a found lookup) returned, as the machine's
        answer: its result as plain JSON, or ``unstored`` when it is not JSON
        (the effect happened all the same, and its completion is recorded)."""
        sent = value if isinstance(value, Sent) else Sent(None, value)
        try:
            return {"external_ref": sent.external_ref, "result": json.loads(canonical_json(sent.result))}
        except InvalidPayload as e:
            why = f"the effect's result was not stored: {e}"
            log.warning("%s:%s: %s", self.spec.job_type, d.op_key, why)
            return {"external_ref": sent.external_ref, "result": None, "unstored": why}

    def _sleep(self, step: Step, d: _Delivery) -> str:
        """Waits before a retry under the claim, never past the job timeout:
        no retry starts after it, so none runs once the claim may be taken over."""
        log.debug("retrying under the claim job=%s key=%s in %sms", self.spec.job_type, d.op_key, step["ms"])
        wait = min(step["ms"] / 1000, d.ctx.remaining())
        if d.beat is not None:
            d.beat.wait(wait)  # ends early when the heartbeat stops the attempts
        else:
            time.sleep(wait)
        if d.beat is not None and d.beat.answer is not None:
            return d.beat.answer  # the claim lost, or its lease unrenewed, meanwhile
        return "timed_out" if d.ctx.remaining() == 0 else "slept"

    def _withdraw(self, step: Step, d: _Delivery) -> Any:
        if d.withdraw is None:
            return {"not_withdrawn": "this effect cannot be withdrawn"}
        try:
            if d.withdraw(d.ctx, step["external_ref"]) is False:  # an explicit no, as Ruby reads a falsy answer
                return {"not_withdrawn": "the destination did not confirm the withdraw"}
        except Exception as e:
            return {"not_withdrawn": str(e) or type(e).__name__}
        return "withdrawn"

    _STEPS: Mapping[str, Callable[["Guard", Step, _Delivery], Any]] = {
        "claim": _claim, "take_over": _take_over, "read": _read, "move": _move, "audit": _audit,
        "fault": _fault, "cancel_requested": _cancel_requested, "perform": _perform,
        "lookup": _lookup, "sleep": _sleep, "withdraw": _withdraw,
    }

    # -- the heartbeat through the attempts -----------------------------------------
    def _attempts_start(self, d: _Delivery) -> None:
        if d.beat is None and not d.acted and self.spec.heartbeat_ms and d.local is None:
            d.beat = _Heartbeat(self, d.ctx)

    def _attempts_over(self, d: _Delivery) -> None:
        if d.beat is not None:
            d.beat.stop()
            d.beat = None
        d.acted = d.acted or d.ctx is not None

    # -- the end ------------------------------------------------------------------
    def _outcome(self, outcome: Mapping[str, Any], d: _Delivery) -> Outcome:
        (name, o), = outcome.items()
        if name == "done":
            return Done(o["result"], o["external_ref"], repeat=o["repeat"])
        if name == "in_progress":
            return InProgress(o["age_ms"], o["lease_ms"], o["owner"])
        if name == "held":
            return Held(o["reason"])
        if name == "failed":
            return Failed(o["error"])
        if name == "cancelled":
            return Cancelled(o["withdrawn_ref"])
        if name == "retry_later":
            return RetryLater(o["reason"], o["retry_after_ms"] or 0)
        if name == "not_due":
            return NotDue(o["due_at_ms"], d.snap.now)
        if name == "withdraw_failed":
            return WithdrawFailed(o["external_ref"], o["error"])
        raise AssertionError(f"the machine ended with an outcome this guard does not know: {name}")

    def _error(self, error: Mapping[str, Any], d: _Delivery) -> OnceonlyError:
        (name, e), = error.items()
        job = self.spec.job_type
        if name == "lost_claim":
            return LostClaim(e["token"], d.snap.record)  # the row last read is the one it names
        if name == "payload_mismatch":
            return PayloadMismatch(job, d.op_key, e["stored"], e["offered"])
        if name == "not_found":
            return NotFound(job, d.op_key)
        if name == "injected_crash":
            return InjectedCrash(e["point"])
        if name == "local_effect_failed":
            failed = LocalEffectFailed(f"local effect of {job}:{d.op_key} failed, its transaction rolled back: {e['why']}")
            failed.__cause__ = d.raised
            return failed
        if name == "timeout":
            return EffectTimeout(f"local effect of {job}:{d.op_key} ran past the job timeout "
                                 f"({fmt_ms(e['timeout_ms'])}); its transaction rolled back")
        raise AssertionError(f"the machine ended with an error this guard does not know: {name}")


def _row(snap: Snapshot) -> Dict[str, Any]:
    """A record as the machine reads it, with the database's time it was read at."""
    r = snap.record
    return {"state": r.state.value, "token": r.token, "attempts": r.attempts, "owner": r.owner,
            "fingerprint": r.fingerprint, "claimed_at_ms": r.claimed_at, "lease_until_ms": r.lease_until,
            "due_at_ms": r.due_at, "external_ref": r.external_ref, "result": r.result, "error": r.error,
            "cancel_requested": r.cancel_requested, "now_ms": snap.now}


class _EffectStopped(BaseException):
    """Raised in the effect's thread by its heartbeat when the claim was lost or
    its lease could not be renewed: not an Exception, so an effect's
    ``except Exception`` cannot swallow it."""


class _Heartbeat:
    """Renews the lease every heartbeat interval while the effect's attempts
    run, and carries the operator's cancel request to the effect's context.
    When the claim is gone, or its lease can no longer be renewed before it
    runs out, it stops the effect (as Rust drops it), so it never acts after
    another worker could take over; ``answer`` is then what the machine is
    told instead of the effect's report (``claim_lost`` or
    ``lease_unrenewed``), for the effect it stopped or the next one."""

    def __init__(self, guard: Guard, ctx: EffectCtx):
        self.guard, self.ctx = guard, ctx
        self.answer: Any = None
        self._worker = threading.get_ident()
        self._lock = threading.Lock()
        self._in_effect = self._raised = self._stopped = False
        self._stop = threading.Event()
        self._answered = threading.Event()
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
                    self._stop_effect({"lease_unrenewed": str(e)})
                    return
                log.warning("heartbeat failed; will retry job=%s key=%s: %s", ctx.job_type, ctx.op_key, e)
                continue
            if beat is None:
                self._stop_effect("claim_lost")
                return
            renewed = time.monotonic()
            if beat[1]:
                ctx._cancel.set()

    def _stop_effect(self, answer: Any) -> None:
        """Raises _EffectStopped in the effect's thread while an effect runs
        there (it lands at the thread's next Python instruction; a call
        blocked in C, such as a socket read, is stopped when it returns)."""
        with self._lock:
            if self._stopped:
                return
            self.answer = answer
            self._answered.set()
            if self._in_effect:
                self._raised = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._worker), ctypes.py_object(_EffectStopped))

    @contextmanager
    def effect_running(self) -> Iterator[None]:
        """Around the effect's call: only there is it stopped by an exception.
        One raised but not yet landed when the effect returns is taken back
        and raised here, so it never lands in the guard's own code."""
        with self._lock:
            self._in_effect = True
        try:
            yield
        finally:
            with self._lock:
                self._in_effect, raised = False, self._raised
            if raised:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._worker), None)
                raise _EffectStopped()

    def wait(self, seconds: float) -> None:
        """Sleeps between tries, waking when the attempts were stopped."""
        self._answered.wait(seconds)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._stop.set()
        self._thread.join()
