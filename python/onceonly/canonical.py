"""Canonical payload JSON and its fingerprint, byte for byte as the Rust core
writes them (protocol/corpus/payloads.json is the shared test).

Object keys sorted by code point at every level, no whitespace, strings as
UTF-8 with only ``"``, ``\\`` and U+0000-U+001F escaped, integers that fit i64
or u64 as integers, every other number as the shortest double that reads back
the same: fixed with at least one decimal when 1e-5 <= |x| < 1e16, otherwise
mantissa and exponent (``1e-6``, ``1e+16``); -0 is ``-0.0``.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

from .errors import InvalidPayload

_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _float(x: float, where: str) -> str:
    if math.isnan(x) or math.isinf(x):
        raise InvalidPayload(f"payload has {x!r} at {where}; JSON has no NaN or infinity")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    # repr gives the shortest digits that read back the same; lay them out anew.
    _, digit_tuple, exp = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple))
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    sci = len(digits) - 1 + exp  # x = d.ddd * 10^sci
    if 1e-5 <= abs(x) < 1e16:
        if sci >= 0:
            whole = digits[: sci + 1].ljust(sci + 1, "0")
            frac = digits[sci + 1 :] or "0"
        else:
            whole, frac = "0", "0" * (-sci - 1) + digits
        return f"{sign}{whole}.{frac}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'+' if sci >= 0 else '-'}{abs(sci)}"


def _int(n: int, where: str) -> str:
    if _I64_MIN <= n <= _U64_MAX:
        return str(n)
    try:
        return _float(float(n), where)
    except OverflowError:
        raise InvalidPayload(f"payload has an integer too large for a double at {where}") from None


def _encode(value: Any, where: str, out: list) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(_int(value, where))
    elif isinstance(value, float):
        out.append(_float(value, where))
    elif isinstance(value, str):
        _check_utf8(value, where)
        out.append(_string(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, f"{where}[{i}]", out)
        out.append("]")
    elif isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise InvalidPayload(f"payload has the non-string object key {k!r} at {where}; JSON keys are strings")
            _check_utf8(k, where)
        out.append("{")
        for i, k in enumerate(sorted(value)):
            if i:
                out.append(",")
            out.append(_string(k))
            out.append(":")
            _encode(value[k], f"{where}.{k}", out)
        out.append("}")
    else:
        raise InvalidPayload(
            f"payload has a {type(value).__name__} at {where}; only JSON values "
            "(None, bool, int, float, str, list, tuple, dict) can be fingerprinted"
        )


def _check_utf8(s: str, where: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPayload(f"payload has a lone surrogate in a string at {where}; it is not UTF-8") from None


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a Python JSON value."""
    out: list = []
    _encode(value, "$", out)
    return "".join(out)


def _parse_int(text: str):
    n = int(text)
    if text.startswith("-") and n == 0:
        return -0.0  # JSON's -0 is a number, read as the double -0.0
    if _I64_MIN <= n <= _U64_MAX:
        return n
    return float(text)


def _refuse_constant(name: str):
    raise InvalidPayload(f"payload is not valid JSON: {name} is not a JSON value")


class _Duplicate:
    """Stands, while parsing, for an object that names `key` twice; `where`
    is its path below the value holding it."""

    def __init__(self, key: str, where: str):
        self.key, self.where = key, where


def _duplicate_in(value: Any, where: str) -> Optional[_Duplicate]:
    # Objects below have been checked by their own hook; only arrays are walked.
    if isinstance(value, _Duplicate):
        return _Duplicate(value.key, where + value.where)
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _duplicate_in(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def _object(pairs: list) -> Any:
    # The first duplicate in document order, as the Rust core finds it: a
    # repeated key before anything inside its value.
    seen = set()
    for key, value in pairs:
        if key in seen:
            return _Duplicate(key, "")
        seen.add(key)
        found = _duplicate_in(value, f".{key}")
        if found is not None:
            return found
    return dict(pairs)


def parse_json(text: str) -> Any:
    """JSON text as the Rust core reads it (big integers as doubles, -0 as
    -0.0); an object naming a key twice is refused, as in every client."""
    try:
        value = json.loads(text, parse_int=_parse_int, parse_constant=_refuse_constant, object_pairs_hook=_object)
    except InvalidPayload:
        raise
    except (ValueError, TypeError) as e:
        raise InvalidPayload(f"payload is not valid JSON: {e}") from None
    found = _duplicate_in(value, "$")
    if found is not None:
        raise InvalidPayload(
            f"payload has the duplicate key {json.dumps(found.key, ensure_ascii=False)} "
            f"in the object at {found.where}; each key may appear once"
        )
    return value


@dataclass(frozen=True)
class Payload:
    """A payload as onceonly stores it: canonical JSON text (or None) and its fingerprint."""

    json: Optional[str]
    fingerprint: str

    @classmethod
    def none(cls) -> "Payload":
        """No payload: every delivery of the operation must then carry none."""
        return cls(None, hashlib.sha256(b"").hexdigest())

    @classmethod
    def of(cls, value: Any) -> "Payload":
        """From a Python JSON value; key order does not change the fingerprint."""
        text = canonical_json(value)
        return cls(text, hashlib.sha256(text.encode("utf-8")).hexdigest())

    @classmethod
    def parse(cls, text: str) -> "Payload":
        """From JSON text, naming the problem when it is not JSON."""
        return cls.of(parse_json(text))

    def value(self) -> Any:
        """The payload as a Python value (None when there is none)."""
        return None if self.json is None else json.loads(self.json)
