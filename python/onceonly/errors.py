"""The exceptions onceonly raises, one per thing that can go wrong.

Every one derives from :class:`OnceonlyError`. Input errors are raised before
anything is written.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional
from urllib.parse import unquote_plus

if TYPE_CHECKING:  # pragma: no cover
    from .record import Record


class OnceonlyError(Exception):
    """Base of every onceonly exception."""


class InvalidInput(OnceonlyError, ValueError):
    """Input that can never be valid; nothing was written."""


class InvalidKey(InvalidInput):
    """An operation key or job type breaks the rules of protocol/corpus/keys.json."""


class InvalidPayload(InvalidInput):
    """A payload that is not JSON (or holds a value JSON cannot carry)."""


class UnknownEffectKind(InvalidInput):
    """An effect kind or stale-claim policy onceonly does not know."""


class TimingError(OnceonlyError):
    """A timing rule of DESIGN.md section 4 is broken: the worker must not start."""


class PayloadMismatch(OnceonlyError):
    """The key is stored with another payload: another operation reusing the key."""

    def __init__(self, job_type: str, op_key: str, stored: str, offered: str):
        self.job_type, self.op_key, self.stored, self.offered = job_type, op_key, stored, offered
        super().__init__(
            f"operation {job_type}:{op_key} exists with another payload "
            f"(stored fingerprint {stored}, this one {offered})"
        )


class LostClaim(OnceonlyError):
    """This worker no longer holds the claim; nothing was written over the row."""

    def __init__(self, token: int, record: "Record"):
        self.token, self.record = token, record
        super().__init__(
            f"lost the claim on {record.job_type}:{record.op_key} (held token {token}); "
            f"the row is now {record.state} with token {record.token}"
        )


class NotFound(OnceonlyError):
    """No record for this job type and key."""

    def __init__(self, job_type: str, op_key: str):
        self.job_type, self.op_key = job_type, op_key
        super().__init__(f"no operation {job_type}:{op_key}")


class Unreachable(OnceonlyError):
    """The database could not be reached (the URL's password is redacted)."""

    def __init__(self, url: str, reason: str):
        self.url, self.reason = url, reason
        super().__init__(f"database {url} unreachable: {reason}")


class DatabaseError(OnceonlyError):
    """Any other database error."""


class InjectedCrash(OnceonlyError):
    """A fault injected at a named point (tests, replay): the worker stopped there."""

    def __init__(self, point: str):
        self.point = point
        super().__init__(f"injected crash at {point}")


class EffectTimeout(OnceonlyError):
    """A local effect did not finish within the job timeout; its transaction rolled back."""


class LocalEffectFailed(OnceonlyError):
    """A local effect raised; its transaction rolled back, nothing was recorded."""


_SECRET_PARAMS = ("password", "sslpassword", "passfile")
_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*):")


def redact(url: str) -> str:
    """The URL with every password replaced by ``***``, safe to print.

    The rule every client shares (protocol/corpus/db_urls.json): the password
    of ``user:pass@`` (up to the last ``@``) and the values of the query's
    ``password``, ``sslpassword`` and ``passfile``; text that is no URL but
    holds ``@`` or ``=`` is not shown at all.
    """
    m = _SCHEME.match(url)
    if m is None:
        return "***" if ("@" in url or "=" in url) else url
    scheme, rest = m.group(1), url[m.end():]
    slashes = "//" if rest.startswith("//") else ""
    body = _mask_query(rest[len(slashes):])
    at = body.rfind("@")
    if at >= 0:
        colon = body.find(":", 0, at)
        if colon >= 0:
            body = f"{body[:colon]}:***{body[at:]}"
    return f"{scheme}:{slashes}{body}"


def _mask_query(body: str) -> str:
    before, sep, query = body.partition("?")
    if not sep:
        return body
    pairs = []
    for pair in query.split("&"):
        name, eq, _ = pair.partition("=")
        if eq and unquote_plus(name).strip().lower() in _SECRET_PARAMS:
            pair = f"{name}=***"
        pairs.append(pair)
    return f"{before}?{'&'.join(pairs)}"


def describe(e: Optional[BaseException]) -> str:
    return "" if e is None else f"{type(e).__name__}: {e}"
