"""Celery integration: guard one task with one decorator.

    from onceonly.celery import guarded_task

    @guarded_task(app, db="postgresql://app@db/app", job="send_receipt",
                  key="order_id", effect="opaque", on_stale="hold",
                  lease="60s", timeout="20s")
    def send_receipt(ctx, order_id, email):
        provider.send(email, idempotency_key=ctx.idempotency_key)

What each outcome does to the message (the task is ``acks_late`` and
``reject_on_worker_lost``, so a killed worker's message comes back):

- done, or a repeat of a completed operation: the task returns the stored result;
- in progress elsewhere, not due yet, or released (not sent / unknown, safe to
  redo): ``self.retry(countdown=...)`` until the lease or backoff has passed;
- held: not retried; logged with job and key; the task fails with :class:`OperationHeld`;
- failed for good / cancelled: not retried (:class:`OperationFailed`, :class:`OperationCancelled`);
- another payload under the same key: :class:`onceonly.PayloadMismatch`, not retried;
- database unreachable or a database error: retried with a countdown (a claim it
  left comes back, once past its lease, for the stale-claim policy).

Before the worker consumes, every guarded task's timing is checked against
the broker's redelivery timeout (DESIGN.md section 4); a violation stops the
worker naming both values.
"""
from __future__ import annotations

import inspect
import logging
import os
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from celery import Celery, signals
from celery.exceptions import Reject, SoftTimeLimitExceeded

from . import connect
from .canonical import Payload
from .errors import DatabaseError, InjectedCrash, InvalidInput, InvalidKey, OnceonlyError, Unreachable
from .guard import Guard, retry_backoff_ms
from .outcome import Cancelled, Done, Failed, Held, InProgress, NotDue, RetryLater, WithdrawFailed
from .spec import JobSpec, Kind, fmt_ms, timing_lines, to_ms
from .stores import Store

log = logging.getLogger("onceonly.celery")

RABBITMQ_DEFAULT_CONSUMER_TIMEOUT_MS = 30 * 60 * 1000  # RabbitMQ's consumer_timeout default
KOMBU_DEFAULT_VISIBILITY_TIMEOUT_MS = 3600 * 1000  # kombu's Redis and SQS default


class OperationHeld(OnceonlyError):
    """The operation is held for a person (``onceonly held``, ``onceonly resolve``)."""


class OperationFailed(OnceonlyError):
    """The operation failed for good (or the policy gave it up)."""


class OperationCancelled(OnceonlyError):
    """The operation was cancelled by an operator."""


VISIBILITY_TIMEOUT_SETTING = 'broker_transport_options["visibility_timeout"]'


def redelivery_timeout_ms(app: Celery) -> Tuple[Optional[int], str]:
    """(ms, the setting to change) for the app's broker: ``onceonly_redelivery_timeout``
    if set; Redis/SQS: ``broker_transport_options['visibility_timeout']`` (kombu's
    default 1h); RabbitMQ: the server's consumer_timeout, which a client cannot
    read, taken as RabbitMQ's default of 30m unless set."""
    conf = app.conf
    explicit = conf.get("onceonly_redelivery_timeout")
    if explicit is not None:
        return to_ms(explicit, "onceonly_redelivery_timeout"), "onceonly_redelivery_timeout"
    url = (conf.broker_url or "amqp://").split("://", 1)[0]
    if url.startswith(("redis", "rediss", "sqs")):
        vt = (conf.broker_transport_options or {}).get("visibility_timeout")
        if vt is None:
            return KOMBU_DEFAULT_VISIBILITY_TIMEOUT_MS, VISIBILITY_TIMEOUT_SETTING
        return to_ms(vt, "visibility_timeout"), VISIBILITY_TIMEOUT_SETTING
    if url.startswith(("amqp", "pyamqp", "amqps")):
        return RABBITMQ_DEFAULT_CONSUMER_TIMEOUT_MS, "RabbitMQ's consumer_timeout, then onceonly_redelivery_timeout"
    return None, "onceonly_redelivery_timeout"


def timing_problems(app: Celery) -> List[str]:
    """Every broken timing rule of the app's guarded tasks, one line each
    (``job JOB: RULE [change SETTING]``, as every client words it)."""
    problems = []
    redelivery, setting = redelivery_timeout_ms(app)
    for task in list(app.tasks.values()):
        spec: Optional[JobSpec] = getattr(task, "onceonly_spec", None)
        if spec is None:
            continue
        # The broker's timeout against the job timeout, and against the longest
        # countdown the guard gives a retry: a retry is a new message a worker
        # holds unacknowledged until its countdown (kombu #337 for ETA tasks).
        checked = replace(spec, redelivery_timeout_ms=redelivery, redelivery_setting=setting)
        problems.extend(timing_lines(spec.job_type, checked.broken_timing_rules()))
    return problems


def _refuse_to_start(sender=None, **_):
    app = getattr(sender, "app", None)
    if app is None:
        return
    problems = timing_problems(app)
    if problems:
        for p in problems:
            log.critical("onceonly: %s", p)
        raise SystemExit("onceonly: the worker refuses to start: timing rule broken: " + "; ".join(problems))


signals.worker_init.connect(_refuse_to_start, weak=False)

_GUARDED: Dict[str, Tuple[Celery, JobSpec]] = {}  # task name -> its app and spec, for the publish check


def _eta_delay_ms(headers: Dict[str, Any]) -> Optional[int]:
    eta = (headers or {}).get("eta")
    if not eta:
        return None
    when = datetime.fromisoformat(eta) if isinstance(eta, str) else eta
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return round((when - datetime.now(timezone.utc)).total_seconds()) * 1000  # whole seconds: a countdown's grain


def _warn_eta_past_redelivery(sender=None, headers=None, **_):
    """A guarded task published with an ETA or countdown beyond the broker's
    redelivery timeout is handed out again and again until it runs (kombu
    #337): the guard keeps the effect once, but every copy is a delivery.
    Warned, not refused: refusing would fail the caller's publish at run time."""
    guarded = _GUARDED.get(sender)
    delay = _eta_delay_ms(headers)
    if guarded is None or delay is None:
        return
    app, spec = guarded
    redelivery, setting = redelivery_timeout_ms(app)
    if redelivery is not None and delay >= redelivery:
        log.warning("onceonly: job %s: task %s is published to run in %s, not less than the queue redelivery "
                    "timeout (%s): the broker will deliver it again and again until then (kombu #337); the guard "
                    "keeps the effect once [change the countdown/eta or %s]", spec.job_type, sender,
                    fmt_ms(delay), fmt_ms(redelivery), setting)


signals.before_task_publish.connect(_warn_eta_past_redelivery, weak=False)


def hard_time_limit_ms(spec: JobSpec) -> int:
    """Celery's hard time limit: past the job timeout (the soft limit, which the
    effect sees as an exception and the guard records as unknown), halfway to
    the lease, so a task that ignores the soft limit is killed before its claim
    can be taken over. With a heartbeat renewing the lease: half a lease past
    the timeout."""
    if spec.heartbeat_ms is None:
        return spec.timeout_ms + (spec.lease_ms - spec.timeout_ms) // 2
    return spec.timeout_ms + spec.lease_ms // 2


def _key_getter(fn: Callable, key: Union[str, Callable]) -> Callable[..., str]:
    if callable(key):
        return key
    sig = inspect.signature(fn)
    names = list(sig.parameters)[1:]  # after ctx
    if key not in names:
        raise InvalidKey(f"key {key!r} is not an argument of {fn.__name__} ({', '.join(names)})")

    def from_argument(*args, **kwargs):
        bound = sig.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return bound.arguments[key]

    return from_argument


class _PerProcess:
    """The store and guard of one worker process (a forked child opens its own)."""

    def __init__(self, db: Union[str, Store], spec: JobSpec, fault_hook):
        self.db, self.spec, self.fault_hook = db, spec, fault_hook
        self.pid, self.guard = None, None

    def get(self) -> Guard:
        if self.guard is None or self.pid != os.getpid():
            store = connect(self.db) if isinstance(self.db, str) else self.db
            # The soft time limit ends the attempt: recorded at once, never redone in-process.
            self.guard = Guard(store, self.spec, fault_hook=self.fault_hook, interrupts=(SoftTimeLimitExceeded,))
            self.pid = os.getpid()
        return self.guard


def guarded_task(app: Celery, *, db: Union[str, Store], job: str, key: Union[str, Callable[..., Any]],
                 effect: str = "keyed", on_stale: str = "hold", lease="30s", timeout="10s",
                 heartbeat=None, max_retries: int = 3, max_retry_delay="1m", lookup=None, withdraw=None,
                 connection: Optional[Callable[[], Any]] = None,
                 payload: Optional[Callable[..., Any]] = None,
                 fault_hook: Optional[Callable[[str], Optional[str]]] = None,
                 **task_options: Any):
    """Makes ``fn(ctx, *args, **kwargs)`` a Celery task guarded by onceonly.

    ``key`` names the argument holding the operation key (or is a function of
    the task's arguments). The payload fingerprinted is ``{"args": [...],
    "kwargs": {...}}`` unless ``payload`` gives another. For ``effect="local"``,
    ``connection()`` returns the user's connection or SQLAlchemy session (closed
    after the task); ``fn`` writes through ``ctx.conn`` in the claim's
    transaction. ``fn``'s return value is the stored result; raise
    :class:`onceonly.NotSent`, :class:`onceonly.OutcomeUnknown` or
    :class:`onceonly.PermanentFailure` for the other outcomes.
    ``max_retries``: how often an unknown or not-sent outcome is retried in
    the process under one claim before it is recorded (released for a later
    claim, or held/failed as the kind says). ``max_retry_delay``: the longest
    countdown the guard gives ``self.retry`` (default 1m, the backoff's
    ceiling); the worker refuses to start unless the broker's redelivery
    timeout is longer. Bad settings raise at decoration time, before any task runs.
    """
    spec = JobSpec.build(job, effect=effect, on_stale=on_stale, lease=lease, timeout=timeout,
                         heartbeat=heartbeat, max_retries=max_retries)
    spec.max_retry_delay_ms = to_ms(max_retry_delay, "max_retry_delay")
    if spec.max_retry_delay_ms <= 0:
        raise InvalidInput(f"max_retry_delay ({fmt_ms(spec.max_retry_delay_ms)}) must be above zero")
    if spec.effect is Kind.LOCAL and connection is None:
        raise InvalidKey("a local effect needs connection=: a function returning your connection or session")
    options: Dict[str, Any] = dict(
        # A killed worker's message and a task killed at its hard time limit
        # both go back to the broker: each is a crash, and the redelivery
        # takes the stale claim over by policy (acks_on_timeout: Celery 5.7+).
        bind=True, acks_late=True, reject_on_worker_lost=True, acks_on_timeout=False, max_retries=None,
        soft_time_limit=spec.timeout_ms / 1000, time_limit=hard_time_limit_ms(spec) / 1000,
    )
    options.update(task_options)

    def decorate(fn: Callable) -> Any:
        get_key = _key_getter(fn, key)
        per_process = _PerProcess(db, spec, fault_hook)

        def run(self, *args, **kwargs):
            op_key = get_key(*args, **kwargs)
            op_key = str(op_key) if isinstance(op_key, int) and not isinstance(op_key, bool) else op_key
            value = payload(*args, **kwargs) if payload else {"args": list(args), "kwargs": kwargs}
            guard = per_process.get()
            try:
                outcome = _deliver(guard, spec, op_key, Payload.of(value), fn, args, kwargs, lookup, withdraw, connection)
            except InjectedCrash:
                # An injected crash stands for a dead worker: the broker redelivers.
                raise Reject("onceonly: injected crash", requeue=True)
            except SoftTimeLimitExceeded as e:
                if spec.effect is Kind.LOCAL:
                    # The guard rolled the local effect back with its claim: nothing happened.
                    countdown = _capped(spec, retry_backoff_ms(self.request.retries + 1) / 1000)
                    log.warning("onceonly: %s:%s: the effect was stopped at the soft time limit (%s), "
                                "its transaction rolled back; retrying in %.1fs", spec.job_type, op_key,
                                fmt_ms(spec.timeout_ms), countdown)
                    raise self.retry(exc=e, countdown=countdown)
                # Inside the effect the guard records the soft limit itself; here it
                # hit the claim or the recording write: retried like a database error.
                raise _retried(self, spec, op_key, e)
            except (Unreachable, DatabaseError) as e:
                raise _retried(self, spec, op_key, e)
            return _settle(self, spec, op_key, outcome)

        name = fn.__name__ if fn.__name__.isidentifier() else spec.job_type.replace(".", "_").replace("-", "_")
        run.__name__, run.__doc__, run.__module__ = name, fn.__doc__, fn.__module__
        run.__qualname__ = name if name != fn.__name__ else getattr(fn, "__qualname__", name)
        task = app.task(**options)(run)
        task.onceonly_spec = spec
        _GUARDED[task.name] = (app, spec)
        return task

    return decorate


def _retried(task, spec: JobSpec, op_key: str, e: BaseException):
    """Retried, not failed: a failed task is acknowledged, and a claim it left
    would never come back for the stale-claim policy."""
    countdown = _capped(spec, 5)
    log.warning("onceonly: %s:%s: %s; retrying in %.1fs", spec.job_type, op_key, e, countdown)
    return task.retry(exc=e, countdown=countdown)


def _capped(spec: JobSpec, countdown_s: float) -> float:
    """A retry's countdown, at most ``max_retry_delay`` (checked against the broker at worker start)."""
    return min(countdown_s, spec.max_retry_delay_ms / 1000)


def _deliver(guard, spec, op_key, payload, fn, args, kwargs, lookup, withdraw, connection):
    if spec.effect is Kind.LOCAL:
        conn = connection()
        try:
            return guard.run_local(conn, op_key, payload, lambda c, ctx: fn(ctx, *args, **kwargs))
        finally:
            conn.close()
    return guard.run(op_key, payload, lambda ctx: fn(ctx, *args, **kwargs), lookup=lookup, withdraw=withdraw)


def _settle(task, spec: JobSpec, op_key: str, outcome):
    """What the outcome does to the message."""
    job = spec.job_type
    if isinstance(outcome, Done):
        return outcome.result
    if isinstance(outcome, InProgress):
        # A live owner finishes (or is stopped) within the job timeout, so a
        # duplicate looks again then and usually finds it done; a dead
        # owner's claim is stale once the lease runs out, whichever is sooner.
        countdown = _capped(spec, max(min(outcome.retry_in_ms, spec.timeout_ms) / 1000 + 0.2, 0.5))
        log.info("onceonly: %s:%s in progress at %s; retrying in %.1fs", job, op_key, outcome.owner, countdown)
        raise task.retry(countdown=countdown, max_retries=None)
    if isinstance(outcome, NotDue):
        # Not due for longer than the cap: looked at again at the cap, still not due, retried again.
        raise task.retry(countdown=_capped(spec, max(outcome.retry_in_ms / 1000, 0.1)), max_retries=None)
    if isinstance(outcome, RetryLater):
        countdown = _capped(spec, max(outcome.retry_after_ms / 1000, 0.1))
        log.info("onceonly: %s:%s not done (%s); retrying in %.1fs", job, op_key, outcome.reason, countdown)
        raise task.retry(countdown=countdown)
    if isinstance(outcome, Held):
        log.warning("onceonly: %s:%s is held for a person, not retried: %s", job, op_key, outcome.reason)
        raise OperationHeld(f"{job}:{op_key} is held: {outcome.reason}")
    if isinstance(outcome, Failed):
        log.warning("onceonly: %s:%s failed, not retried: %s", job, op_key, outcome.error)
        raise OperationFailed(f"{job}:{op_key} failed: {outcome.error}")
    if isinstance(outcome, (Cancelled, WithdrawFailed)):
        log.warning("onceonly: %s:%s cancelled: %s", job, op_key, outcome)
        raise OperationCancelled(f"{job}:{op_key}: {outcome}")
    raise OnceonlyError(f"{job}:{op_key}: unexpected outcome {outcome!r}")


def explain_timing(app: Celery) -> str:
    """A line per guarded task: its lease, timeout and the broker's redelivery timeout."""
    redelivery, source = redelivery_timeout_ms(app)
    lines = []
    for task in app.tasks.values():
        spec = getattr(task, "onceonly_spec", None)
        if spec is not None:
            lines.append(f"{task.name}: lease {fmt_ms(spec.lease_ms)}, timeout {fmt_ms(spec.timeout_ms)}, "
                         f"redelivery {fmt_ms(redelivery) if redelivery else '?'} ({source})")
    return "\n".join(lines)
