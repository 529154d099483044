"""What an effect reports (DESIGN.md section 3): done, not sent, unknown or
permanent failure; and what it is given (the context)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class Sent:
    """The effect happened: its reference at the destination and what it returned."""

    external_ref: Optional[str] = None
    result: Any = None


class EffectSignal(Exception):
    """Raised by an effect to report an outcome other than done."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NotSent(EffectSignal):
    """Surely not done (nothing reached the destination): safe to retry."""


class OutcomeUnknown(EffectSignal):
    """It may have happened (timeout, reset): treated like a crash after the effect."""


class PermanentFailure(EffectSignal):
    """It failed for good: not retried."""


@dataclass
class EffectCtx:
    """What the effect may need: identity, the idempotency key, the claim's
    token and attempt, the payload, the time left, and whether an operator
    asked to cancel (updated by the heartbeat)."""

    job_type: str
    op_key: str
    idempotency_key: str
    token: int
    attempt: int
    payload: Any
    deadline: float = 0.0
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    conn: Any = None

    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def remaining(self) -> float:
        """Seconds left before the job timeout (give it to your HTTP client)."""
        return max(0.0, self.deadline - time.monotonic())
