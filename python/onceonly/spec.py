"""What a guarded job is: type, effect kind, stale-claim policy and timing,
with the timing rules of DESIGN.md section 4 (the same sentences as Rust)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import List, Optional, Union

from .errors import InvalidInput, TimingError, UnknownEffectKind
from .keys import validate_job_type

DurationLike = Union[str, int, float, timedelta]


class StalePolicy(str, Enum):
    """What to do when nobody can tell whether an opaque effect happened."""

    HOLD = "hold"
    AT_LEAST_ONCE = "at-least-once"
    AT_MOST_ONCE = "at-most-once"

    @classmethod
    def parse(cls, name: Union[str, "StalePolicy"]) -> "StalePolicy":
        try:
            return cls(name)
        except ValueError:
            raise UnknownEffectKind(
                f"unknown stale-claim policy {name!r}; one of hold, at-least-once, at-most-once"
            ) from None


class Kind(str, Enum):
    """How the effect can be made once (DESIGN.md section 3)."""

    LOCAL = "local"
    KEYED = "keyed"
    LOOKUP = "lookup"
    OPAQUE = "opaque"

    @classmethod
    def parse(cls, name: Union[str, "Kind"]) -> "Kind":
        try:
            return cls(name)
        except ValueError:
            raise UnknownEffectKind(
                f"unknown effect kind {name!r}; one of local, keyed, lookup, opaque"
            ) from None


_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|sec|s|min|m|h)\s*")


def to_ms(value: DurationLike, what: str = "duration") -> int:
    """Milliseconds from ``"500ms"``, ``"2s"``, ``"1m 30s"``, seconds (int/float) or a timedelta."""
    if isinstance(value, timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, bool):
        raise InvalidInput(f"{what} {value!r} is not a duration like 500ms, 2s or 5m")
    if isinstance(value, (int, float)):
        if value < 0:
            raise InvalidInput(f"{what} {value!r} is negative")
        return round(value * 1000)
    if isinstance(value, str):
        text, total, pos = value.strip(), 0.0, 0
        while pos < len(text):
            m = _PART.match(text, pos)
            if not m:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if text and pos == len(text):
            return round(total)
    raise InvalidInput(f"{what} {value!r} is not a duration like 500ms, 2s or 5m")


def fmt_ms(ms: int) -> str:
    """A duration as humantime writes it (``10s``, ``1m 30s``, ``500ms``)."""
    if ms == 0:
        return "0s"
    parts, rest = [], ms
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n}{unit}")
    return " ".join(parts)


@dataclass
class JobSpec:
    """A guarded job's settings; :meth:`validate` checks the timing rules.

    Defaults are the command line's: lease 30s, timeout 10s, no heartbeat.
    """

    job_type: str
    effect: Kind = Kind.KEYED
    on_stale: StalePolicy = StalePolicy.HOLD
    lease_ms: int = 30_000
    timeout_ms: int = 10_000
    heartbeat_ms: Optional[int] = None
    redelivery_timeout_ms: Optional[int] = None
    lock_lifetime_ms: Optional[int] = None
    max_retries: int = 3
    notes: List[str] = field(default_factory=list)
    #: where the user sets the redelivery timeout, named in a refusal
    redelivery_setting: str = "redelivery_timeout"
    #: the longest countdown the queue integration gives a retry (Celery), if any
    max_retry_delay_ms: Optional[int] = None

    @classmethod
    def build(
        cls,
        job_type: str,
        effect: Union[str, Kind] = "keyed",
        on_stale: Union[str, StalePolicy] = "hold",
        lease: DurationLike = "30s",
        timeout: DurationLike = "10s",
        heartbeat: Optional[DurationLike] = None,
        redelivery_timeout: Optional[DurationLike] = None,
        max_retries: int = 3,
    ) -> "JobSpec":
        """A spec from user input, refusing bad names and broken timing rules."""
        validate_job_type(job_type)
        spec = cls(
            job_type=job_type,
            effect=Kind.parse(effect),
            on_stale=StalePolicy.parse(on_stale),
            lease_ms=to_ms(lease, "lease"),
            timeout_ms=to_ms(timeout, "timeout"),
            heartbeat_ms=None if heartbeat is None else to_ms(heartbeat, "heartbeat"),
            redelivery_timeout_ms=None if redelivery_timeout is None else to_ms(redelivery_timeout, "redelivery timeout"),
            max_retries=max_retries,
        )
        spec.validate()
        return spec

    @property
    def kind_name(self) -> str:
        """``keyed``, ``opaque/hold``, ... as the Rust tools print it."""
        return f"opaque/{self.on_stale.value}" if self.effect is Kind.OPAQUE else self.effect.value

    def validate(self) -> None:
        validate_job_type(self.job_type)
        # The guard compares kinds and policies by identity: names given to the
        # dataclass directly ("opaque", "hold") become the enum members here.
        self.effect, self.on_stale = Kind.parse(self.effect), StalePolicy.parse(self.on_stale)
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise InvalidInput(f"max_retries {self.max_retries!r} must be 0 or more")
        refused = timing_refusal(self.job_type, self.broken_timing_rules())
        if refused:
            raise TimingError(refused)

    def broken_timing_rules(self) -> List[str]:
        """Each broken rule as a sentence with both numbers and, in brackets,
        the settings to change; empty when all hold. Worded as every client
        words it (protocol/corpus/timing.json)."""
        d, broken = fmt_ms, []
        if self.lease_ms <= 0 or self.timeout_ms <= 0:
            broken.append(f"lease ({d(self.lease_ms)}) and timeout ({d(self.timeout_ms)}) must both be above zero "
                          "[change lease or timeout]")
        hb = self.heartbeat_ms
        if hb is None and self.timeout_ms >= self.lease_ms:
            broken.append(
                f"job timeout ({d(self.timeout_ms)}) must be shorter than the lease ({d(self.lease_ms)}), "
                "or a heartbeat must renew the lease [change timeout, lease or heartbeat]"
            )
        elif hb is not None and (hb <= 0 or hb > self.lease_ms // 3):
            broken.append(
                f"heartbeat ({d(hb)}) must renew the lease at least every lease/3 ({d(self.lease_ms // 3)}) "
                "[change heartbeat or lease]"
            )
        r, where = self.redelivery_timeout_ms, self.redelivery_setting
        if r is not None and r <= self.timeout_ms:
            broken.append(
                f"queue redelivery timeout ({d(r)}) must be longer than the job timeout ({d(self.timeout_ms)}) "
                f"[change {where} or timeout]"
            )
        lk = self.lock_lifetime_ms
        if lk is not None and lk <= self.timeout_ms:
            broken.append(f"lock lifetime ({d(lk)}) must be longer than the job timeout ({d(self.timeout_ms)}) "
                          "[change lock_lifetime or timeout]")
        delay = self.max_retry_delay_ms
        if r is not None and delay is not None and r <= delay:
            # A retry is a new message held, unacknowledged, by a worker until
            # its countdown: past the redelivery timeout the broker hands it out again.
            broken.append(
                f"queue redelivery timeout ({d(r)}) must be longer than the guard's longest retry delay ({d(delay)}), "
                f"or the broker hands a retry waiting for its countdown to another worker [change {where} or max_retry_delay]"
            )
        return broken


def timing_lines(job_type: str, rules: List[str]) -> List[str]:
    """One line per broken rule, ``job JOB: RULE``, as every client names the job."""
    return [f"job {job_type}: {rule}" for rule in rules]


def timing_refusal(job_type: str, rules: List[str]) -> Optional[str]:
    """The refusal every client raises (``TimingError``), or None when every rule holds."""
    lines = timing_lines(job_type, rules)
    return "timing rule broken: " + "; ".join(lines) if lines else None
