"""What became of one delivery of an operation (the Rust guard's ``Outcome``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


class Outcome:
    """Base of the outcomes; ``name`` is a short word for logs."""

    name = "outcome"


@dataclass
class Done(Outcome):
    """Completed: by this delivery, or by an earlier one (``repeat``) whose stored result this is."""

    result: Any
    external_ref: Optional[str] = None
    repeat: bool = False
    name = "done"


@dataclass
class InProgress(Outcome):
    """Another worker holds a live claim: leave the message for redelivery."""

    age_ms: int
    lease_ms: int
    owner: Optional[str]
    name = "in_progress"

    @property
    def retry_in_ms(self) -> int:
        """When the claim's lease runs out (then the claim is stale)."""
        return max(self.lease_ms - self.age_ms, 0)


@dataclass
class Held(Outcome):
    """Nobody can tell whether the effect happened: a person must resolve it."""

    reason: Optional[str]
    name = "held"


@dataclass
class Failed(Outcome):
    """Failed for good, or given up by the policy."""

    error: Optional[str]
    name = "failed"


@dataclass
class Cancelled(Outcome):
    """Cancelled; ``withdrawn_ref`` names an item withdrawn after the effect."""

    withdrawn_ref: Optional[str] = None
    name = "cancelled"


@dataclass
class RetryLater(Outcome):
    """Not done this time, safe to deliver again (the claim was released)."""

    reason: str
    retry_after_ms: int = 0
    name = "retry_later"


@dataclass
class NotDue(Outcome):
    """Queued for later; its due time has not come."""

    due_at: Optional[int]
    now: int
    name = "not_due"

    @property
    def retry_in_ms(self) -> int:
        return max((self.due_at or self.now) - self.now, 0)


@dataclass
class WithdrawFailed(Outcome):
    """A cancel came while the effect ran and the withdraw failed: the record stays completed."""

    external_ref: Optional[str]
    error: str
    name = "withdraw_failed"
