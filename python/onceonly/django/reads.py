"""The operator's reads for the manage.py commands, on the stores' own
statements (operator_held.sql, operator_stuck.sql, get.sql, history.sql),
printed in the shapes of the CLI's ``held``, ``stuck`` and ``history --json``."""
from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional

from ..record import AuditEvent, Record
from ..spec import fmt_ms
from ..stores import Store


def iso(ms: Optional[int]) -> Optional[str]:
    """Milliseconds since the epoch as the CLI prints them (``2026-12-03T06:50:37.913Z``)."""
    if ms is None:
        return None
    at = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ms) % 1000:03d}Z"


def held(store: Store, job: Optional[str] = None) -> List[Record]:
    """Held operations, oldest claim first."""
    return store.held(job)


def stuck(store: Store, job: Optional[str] = None) -> List[Record]:
    """Claims past their lease, oldest claim first."""
    return store.stuck(job)


def waiting(r: Record, now: int) -> Dict[str, Any]:
    """One held or stuck record as a line of the CLI's ``held --json`` / ``stuck --json``."""
    started = r.claimed_at if r.claimed_at is not None else r.created_at
    lease_ms = r.lease_until - r.claimed_at if r.lease_until is not None and r.claimed_at is not None else None
    over = now - r.lease_until if r.lease_until is not None else None
    return {"job": r.job_type, "key": r.op_key, "state": r.state.value, "token": r.token, "owner": r.owner,
            "attempts": r.attempts, "age_ms": max(now - started, 0), "age": fmt_ms(max(now - started, 0)),
            "claimed_at": iso(r.claimed_at), "lease_until": iso(r.lease_until), "lease_ms": lease_ms,
            "over_lease_ms": over, "external_ref": r.external_ref, "error": r.error,
            "cancel_requested": r.cancel_requested, "updated_at": iso(r.updated_at), "now": iso(now)}


def record_line(r: Record) -> Dict[str, Any]:
    """The record line of the CLI's ``history --json``."""
    return {"kind": "record", "job": r.job_type, "key": r.op_key, "state": r.state.value, "token": r.token,
            "owner": r.owner, "attempts": r.attempts, "fingerprint": r.fingerprint, "payload": r.payload,
            "external_ref": r.external_ref, "result": r.result, "cancel_requested": r.cancel_requested,
            "error": r.error, "due_at": iso(r.due_at), "claimed_at": iso(r.claimed_at),
            "lease_until": iso(r.lease_until), "created_at": iso(r.created_at), "updated_at": iso(r.updated_at),
            "completed_at": iso(r.completed_at)}


def event_line(e: AuditEvent) -> Dict[str, Any]:
    """An event line of the CLI's ``history --json``."""
    return {"kind": "event", "id": e.id, "job": e.job_type, "key": e.op_key, "at": iso(e.at), "event": e.event,
            "actor": e.actor, "token": e.token, "from_state": e.from_state, "to_state": e.to_state,
            "detail": e.detail, "attempt": e.attempt, "retry_after_ms": e.retry_after_ms}


def history(store: Store, job: str, key: str) -> Optional[List[Dict[str, Any]]]:
    """The record line, then its events oldest first; None when there is no record."""
    snap = store.get(job, key)
    if snap is None:
        return None
    return [record_line(snap.record)] + [event_line(e) for e in store.history(job, key)]
