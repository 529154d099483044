"""Identity of an operation: job type and operation key (protocol/corpus/keys.json)."""
from __future__ import annotations

import unicodedata

from .errors import InvalidKey

MAX_KEY_BYTES = 512
MAX_JOB_TYPE_BYTES = 128


def validate_job_type(job_type: object) -> str:
    """A job type is ``[A-Za-z0-9_.-]+``, at most 128 bytes."""
    if not isinstance(job_type, str):
        raise InvalidKey(f"job type must be a str, not {type(job_type).__name__}")
    if not job_type:
        raise InvalidKey("job type is empty")
    size = len(job_type.encode("utf-8", "surrogatepass"))
    if size > MAX_JOB_TYPE_BYTES:
        raise InvalidKey(f"job type is {size} bytes, the limit is {MAX_JOB_TYPE_BYTES}")
    for ch in job_type:
        if not (ch.isascii() and (ch.isalnum() or ch in "_.-")):
            raise InvalidKey(
                f"job type {job_type!r} has {ch!r}; only letters, digits, '_', '.' and '-' are allowed"
            )
    return job_type


def validate_op_key(op_key: object) -> str:
    """An operation key is non-empty UTF-8 of at most 512 bytes without control
    characters (Unicode Cc), not beginning or ending with a space (U+0020): it
    travels in an HTTP header, logs and screens."""
    if not isinstance(op_key, str):
        raise InvalidKey(f"operation key must be a str, not {type(op_key).__name__}")
    if not op_key:
        raise InvalidKey("operation key is empty")
    try:
        encoded = op_key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKey("operation key has a lone surrogate; keys are UTF-8") from None
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidKey(f"operation key is {len(encoded)} bytes, the limit is {MAX_KEY_BYTES}")
    for i, ch in enumerate(op_key):
        if unicodedata.category(ch) == "Cc":
            at = len(op_key[:i].encode("utf-8"))
            raise InvalidKey(
                f"operation key has the control character U+{ord(ch):04X} at byte {at}; "
                "keys may not contain control characters"
            )
    if op_key.startswith(" ") or op_key.endswith(" "):
        # An HTTP header's value loses its end spaces: "a " would reach the
        # destination as "a", another operation's key.
        raise InvalidKey(f"operation key {op_key!r} begins or ends with a space; an HTTP header would drop it")
    return op_key


def idempotency_key(job_type: str, op_key: str) -> str:
    """The key a destination dedups on: ``JOB_TYPE:OP_KEY``."""
    return f"{job_type}:{op_key}"
