"""onceonly for Python: make a background job's side effect happen once per
business operation, on the same tables and protocol as the Rust stores.

    import onceonly
    store = onceonly.connect("postgresql://app@db/app")
    store.migrate()
    guard = onceonly.Guard(store, onceonly.JobSpec.build("send_email", effect="keyed"))
    outcome = guard.run("order-42", onceonly.Payload.of({"to": "a@b.c"}), send)
"""
from .canonical import Payload, canonical_json
from .effect import EffectCtx, NotSent, OutcomeUnknown, PermanentFailure, Sent
from .errors import (DatabaseError, EffectTimeout, InjectedCrash, InvalidInput, InvalidKey,
                     InvalidPayload, LocalEffectFailed, LostClaim, NotFound, OnceonlyError,
                     PayloadMismatch, TimingError, UnknownEffectKind, Unreachable)
from .guard import Guard
from .keys import idempotency_key, validate_job_type, validate_op_key
from .outcome import (Cancelled, Done, Failed, Held, InProgress, NotDue, Outcome, RetryLater,
                      WithdrawFailed)
from .record import Claim, Record, Snapshot, State
from .spec import JobSpec, Kind, StalePolicy
from .stores import Store, connect

__all__ = [
    "Payload", "canonical_json", "EffectCtx", "NotSent", "OutcomeUnknown", "PermanentFailure", "Sent",
    "DatabaseError", "EffectTimeout", "InjectedCrash", "InvalidInput", "InvalidKey", "InvalidPayload",
    "LocalEffectFailed", "LostClaim", "NotFound", "OnceonlyError", "PayloadMismatch", "TimingError",
    "UnknownEffectKind", "Unreachable", "Guard", "idempotency_key", "validate_job_type", "validate_op_key",
    "Cancelled", "Done", "Failed", "Held", "InProgress", "NotDue", "Outcome", "RetryLater", "WithdrawFailed",
    "Claim", "Record", "Snapshot", "State", "JobSpec", "Kind", "StalePolicy", "Store", "connect",
]
