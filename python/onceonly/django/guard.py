"""A local effect on Django's own connection: the claim, the function's ORM
writes and the completion run in one ``transaction.atomic()`` block on
``connections[using]``, so they commit or roll back together. Called inside
the caller's own atomic block, it is a savepoint there and the caller's
commit decides."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, Union

from django.db import connections

from ..canonical import Payload
from ..errors import InvalidKey
from ..guard import Guard
from ..outcome import Outcome
from ..spec import JobSpec
from . import conf
from .stores import LazyStore


def key_getter(fn: Callable, key: Union[str, Callable[..., Any]]) -> Callable[..., Any]:
    """The operation key from ``fn``'s arguments (after ``ctx``), by name or by a function of them."""
    if callable(key):
        return key
    sig = inspect.signature(fn)
    names = list(sig.parameters)[1:]
    if key not in names:
        raise InvalidKey(f"key {key!r} is not an argument of {fn.__name__} ({', '.join(names)})")

    def from_argument(*args, **kwargs):
        bound = sig.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return bound.arguments[key]

    return from_argument


def guard(*, job: str, key: Union[str, Callable[..., Any]], using: Optional[str] = None,
          payload: Optional[Callable[..., Any]] = None, lease="30s", timeout="10s"):
    """Guards ``fn(ctx, *args, **kwargs)``, a local effect written through Django's ORM.

    Calling the decorated function returns the :class:`onceonly.Outcome`:
    ``Done(result, repeat=False)`` the first time, ``Done(result, repeat=True)``
    for every later call with the same key, without running ``fn`` again. An
    exception in ``fn`` rolls back its writes and the claim
    (:class:`onceonly.LocalEffectFailed`). ``ONCEONLY['JOBS'][job]`` in settings
    overrides ``lease`` and ``timeout``.
    """
    opts = conf.job_options(job, lease=lease, timeout=timeout)
    spec = JobSpec.build(job, effect="local", lease=opts["lease"], timeout=opts["timeout"])
    the_guard = Guard(LazyStore(using), spec)

    def decorate(fn: Callable) -> Callable[..., Outcome]:
        get_key = key_getter(fn, key)

        @functools.wraps(fn)
        def guarded(*args, **kwargs) -> Outcome:
            op_key = get_key(*args, **kwargs)
            op_key = str(op_key) if isinstance(op_key, int) and not isinstance(op_key, bool) else op_key
            value = payload(*args, **kwargs) if payload else {"args": list(args), "kwargs": kwargs}
            conn = connections[using or conf.options()["DATABASE"]]
            return the_guard.run_local(conn, op_key, Payload.of(value), lambda c, ctx: fn(ctx, *args, **kwargs))

        guarded.onceonly_guard = the_guard
        return guarded

    return decorate
