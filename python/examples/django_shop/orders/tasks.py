from onceonly.django.celery import guarded_task
from shop.celery import app

from .models import Order, Shipment


# The one change that guards the job: @guarded_task instead of @app.task.
# The Shipment row, the claim and the completion commit in one transaction on
# Django's connection; a redelivery finds the record completed and writes nothing.
@guarded_task(app, job="ship_order", key="order_id")
def ship_order(ctx, order_id):
    order = Order.objects.get(pk=order_id)
    shipment = Shipment.objects.create(order=order, carrier_ref=f"parcel-{order_id}")
    return {"shipment": shipment.pk}
