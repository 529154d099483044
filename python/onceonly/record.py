"""The operation record as every store returns it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping, Optional


class State(str, Enum):
    """Where an operation stands (the ``state`` column)."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    HELD = "held"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Record:
    """One row of the ops table."""

    job_type: str
    op_key: str
    state: State
    token: int
    owner: Optional[str]
    attempts: int
    fingerprint: str
    payload: Optional[str]
    external_ref: Optional[str]
    result: Optional[str]
    cancel_requested: bool
    error: Optional[str]
    due_at: Optional[int]
    claimed_at: Optional[int]
    lease_until: Optional[int]
    created_at: int
    updated_at: int
    completed_at: Optional[int]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Record":
        return cls(
            job_type=row["job_type"],
            op_key=row["op_key"],
            state=State(row["state"]),
            token=int(row["token"]),
            owner=row["owner"],
            attempts=int(row["attempts"]),
            fingerprint=row["fingerprint"],
            payload=row["payload"],
            external_ref=row["external_ref"],
            result=row["result"],
            cancel_requested=bool(row["cancel_requested"]),
            error=row["error"],
            due_at=row["due_at"],
            claimed_at=row["claimed_at"],
            lease_until=row["lease_until"],
            created_at=int(row["created_at"]),
            updated_at=int(row["updated_at"]),
            completed_at=row["completed_at"],
        )

    def result_value(self) -> Any:
        """The stored result as a Python value (None when there is none)."""
        if self.result is None:
            return None
        try:
            return json.loads(self.result)
        except ValueError:
            return None

    def lease_expired(self, now: int) -> bool:
        return self.lease_until is None or self.lease_until <= now


@dataclass(frozen=True)
class Snapshot:
    """A record with the database's time when it was read (ms since the epoch)."""

    record: Record
    now: int


@dataclass(frozen=True)
class Claim:
    """A claim this worker holds: the fencing token every later write names."""

    token: int
    attempts: int
    claimed_at: int
    lease_until: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Claim":
        return cls(int(row["token"]), int(row["attempts"]), int(row["claimed_at"]), int(row["lease_until"]))


@dataclass(frozen=True)
class AuditEvent:
    """One row of the audit trail. ``event`` is kept as stored, so a name
    this client does not know (written by a newer one) is read, not refused;
    ``attempt`` and ``retry_after_ms`` are set on a release only."""

    id: int
    job_type: str
    op_key: str
    at: int
    event: str
    actor: str
    token: int
    from_state: Optional[str]
    to_state: Optional[str]
    detail: Optional[str]
    attempt: Optional[int] = None
    retry_after_ms: Optional[int] = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "AuditEvent":
        return cls(*(row.get(k) for k in ("id", "job_type", "op_key", "at", "event", "actor", "token",
                                          "from_state", "to_state", "detail", "attempt", "retry_after_ms")))
