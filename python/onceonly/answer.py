"""What a destination's answer may hold before it is stored, and how a
value from outside is shown (the Rust core's ``onceonly::answer``; the
shared cases are protocol/corpus/answers.json).

An external reference is at most 2048 bytes of UTF-8, a result (its JSON
text as stored) at most 65536 bytes; neither holds a control character:
Unicode Cc or a bidirectional control. A violation is the destination
breaking the protocol: the operation fails for good and nothing of the
answer is stored.
"""
from __future__ import annotations

from typing import Optional

from .errors import OnceonlyError

MAX_REFERENCE_BYTES = 2048
MAX_RESULT_BYTES = 65536

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


class AnswerError(OnceonlyError):
    """An answer that breaks a rule; ``rule`` is ``too_long`` or ``control``."""

    def __init__(self, rule: str, message: str):
        super().__init__(message)
        self.rule = rule


def is_control(ch: str) -> bool:
    """Unicode Cc (U+0000-U+001F, U+007F-U+009F) or a bidirectional control."""
    cp = ord(ch)
    return cp < 0x20 or 0x7F <= cp <= 0x9F or cp in _BIDI


def _check(part: str, text: str, limit: int) -> None:
    size = len(text.encode("utf-8"))
    if size > limit:
        raise AnswerError("too_long", f"the destination's {part} is {size} bytes, over the limit of {limit}: "
                                      "it breaks the protocol and is not stored")
    for i, ch in enumerate(text):
        if is_control(ch):
            at = len(text[:i].encode("utf-8"))
            start = text[:80] + ("…" if len(text) > 80 else "")
            raise AnswerError("control", f"the destination's {part} holds control character U+{ord(ch):04X} "
                                         f"at byte {at} (\"{escape_controls(start)}\"): it breaks the protocol "
                                         "and is not stored")


def check_reference(reference: str) -> None:
    """Raises AnswerError unless the reference keeps the rules."""
    _check("external reference", reference, MAX_REFERENCE_BYTES)


def check_result(text: str) -> None:
    """Raises AnswerError unless the result's JSON text keeps the rules."""
    _check("result", text, MAX_RESULT_BYTES)


def broken(reference: Optional[str], result_text: Optional[str]) -> Optional[str]:
    """Why an answer may not be stored, or None."""
    try:
        if reference is not None:
            check_reference(reference)
        if result_text is not None:
            check_result(result_text)
    except AnswerError as e:
        return str(e)
    return None


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape, for display."""
    out = []
    for ch in text:
        if not is_control(ch):
            out.append(ch)
        elif ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    return "".join(out)
