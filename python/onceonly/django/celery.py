"""``guarded_task`` for a Django project: the store defaults to Django's own
database (``ONCEONLY['DATABASE']``), a local effect runs on Django's
connection for that alias, and ``ONCEONLY['JOBS'][job]`` overrides the
decorator's timing and policy. Tasks keep the app's task class, so
``delay_on_commit`` (Celery 5.4+'s DjangoTask) works as it does for any task.

    from onceonly.django.celery import guarded_task

    @guarded_task(app, job="ship_order", key="order_id")
    def ship_order(ctx, order_id):
        Shipment.objects.create(order_id=order_id)
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

from celery import Celery
from django.db import connections

from .. import celery as onceonly_celery
from . import conf
from .stores import LazyStore


def guarded_task(app: Celery, *, job: str, key: Union[str, Callable[..., Any]], effect: str = "local",
                 using: Optional[str] = None, **options: Any):
    """:func:`onceonly.celery.guarded_task` on Django's database; ``effect`` defaults to ``"local"``.

    A local effect runs on Django's connection for the alias; after the task
    it is closed as Django closes connections after a request
    (``CONN_MAX_AGE``, or when unusable), never under an open atomic block.
    """
    opts = conf.job_options(job, effect=effect, **options)
    if opts.get("effect") == "local":
        opts.setdefault("connection", lambda: Lent(connections[using or conf.options()["DATABASE"]]))
    return onceonly_celery.guarded_task(app, db=LazyStore(using), job=job, key=key, **opts)


class Lent:
    """Django's connection as onceonly.celery's local path takes it: that path
    closes its connection after the task, which here must follow Django's
    rules, not end a caller's transaction (a task applied eagerly inside an
    atomic block) nor a persistent connection."""

    def __init__(self, django_connection):
        self.django_connection = django_connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self.django_connection, name)

    def close(self) -> None:
        if not self.django_connection.in_atomic_block:
            self.django_connection.close_if_unusable_or_obsolete()
