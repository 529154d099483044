"""onceonly in a Django project: ``INSTALLED_APPS += ["onceonly.django"]``,
``manage.py migrate`` creates the tables, and a job's ORM writes commit or
roll back with its operation record:

    from onceonly.django import guard

    @guard(job="ship_order", key="order_id")
    def ship_order(ctx, order_id):
        Shipment.objects.create(order_id=order_id)

For Celery tasks, :func:`onceonly.django.celery.guarded_task`. Settings:
:mod:`onceonly.django.conf`. Guide: docs/django.md.
"""
from .guard import guard
from .stores import store

__all__ = ["guard", "store"]
