"""The arguments of each statement, in the order of the numbered parameters
of the .sql files (the same numbering for SQLite and PostgreSQL). Parameter 1
is the clock offset in ms wherever the statement reads the clock."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..record import State


@dataclass
class OpMove:
    """One fenced transition: only from ``from_state`` with ``token``; None fields keep their value."""

    job_type: str
    op_key: str
    token: int
    from_state: State
    to: State
    unless_cancel_requested: bool = False
    external_ref: Optional[str] = None
    result: Optional[str] = None
    error: Optional[str] = None
    retry_after_ms: Optional[int] = None


def claim(offset: int, job: str, key: str, owner: str, fingerprint: str, payload: Optional[str], lease_ms: int) -> Tuple:
    return (offset, job, key, owner, fingerprint, payload, lease_ms)


def take_over(offset: int, job: str, key: str, stale_token: int, to: State, owner: str, lease_ms: int, reason: str) -> Tuple:
    return (offset, job, key, stale_token, to.value, owner, lease_ms, reason)


def move(offset: int, p: OpMove, flag) -> Tuple:
    """``flag`` turns the cancel condition into the dialect's type (int or bool)."""
    return (
        offset, p.job_type, p.op_key, p.token, p.from_state.value, p.to.value,
        p.external_ref, p.result, p.error, flag(p.unless_cancel_requested), p.retry_after_ms or 0,
    )


def heartbeat(offset: int, job: str, key: str, token: int, lease_ms: int) -> Tuple:
    return (offset, job, key, token, lease_ms)


def request_cancel(offset: int, job: str, key: str, token: int) -> Tuple:
    return (offset, job, key, token)


def get(offset: int, job: str, key: str) -> Tuple:
    return (offset, job, key)


def enqueue(offset: int, job: str, key: str, fingerprint: str, payload: Optional[str], delay_ms: int) -> Tuple:
    return (offset, job, key, fingerprint, payload, delay_ms)


def audit(offset: int, job: str, key: str, event: str, actor: str, token: int,
          from_state: Optional[State], to: Optional[State], detail: Optional[str],
          attempt: Optional[int] = None, retry_after_ms: Optional[int] = None) -> Tuple:
    return (offset, job, key, event, actor, token,
            from_state.value if from_state else None, to.value if to else None, detail,
            attempt, retry_after_ms)


def page(offset: int, job: Optional[str], limit, skip: int) -> Tuple:
    """operator_held / operator_stuck: one job type or all (None), page size, rows skipped."""
    return (offset, job, limit, skip)


def history(job: str, key: str) -> Tuple:
    return (job, key)


def now(offset: int) -> Tuple:
    return (offset,)
