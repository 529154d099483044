"""manage.py place_orders: an order placed in a transaction, its ship_order
task sent on commit three times (a duplicate delivery, twice), and an order
whose transaction rolls back (its task is never sent)."""
from django.core.management.base import BaseCommand
from django.db import transaction

from orders.models import Order, Shipment
from orders.tasks import ship_order


class Command(BaseCommand):
    help = "Place two orders; print what was shipped"

    def handle(self, *args, **options):
        sent = []
        with transaction.atomic():
            order = Order.objects.create(email="ana@example.com")
            for _ in range(3):
                transaction.on_commit(lambda: sent.append(ship_order.delay(order.pk)))
        results = [r.get(timeout=60) for r in sent]
        self.stdout.write(f"order {order.pk}: {len(sent)} deliveries, results {results}")

        class Abandoned(Exception):
            pass

        try:
            with transaction.atomic():
                dropped = Order.objects.create(email="bo@example.com")
                ship_order.delay_on_commit(dropped.pk)
                raise Abandoned()
        except Abandoned:
            pass
        shipments = Shipment.objects.filter(order=order).count()
        self.stdout.write(f"order {order.pk}: shipment rows {shipments}")
        self.stdout.write(f"rolled-back order: orders {Order.objects.filter(pk=dropped.pk).count()}, "
                          f"shipments {Shipment.objects.filter(order_id=dropped.pk).count()}")
        if shipments == 1 and all(r == results[0] for r in results):
            self.stdout.write("shipped once")
        else:
            raise SystemExit("shipped more than once or not at all")
