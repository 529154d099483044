from django.db import models


class Order(models.Model):
    email = models.EmailField()


class Shipment(models.Model):
    """Written by the ship_order task; not unique on order, so a second
    shipment of one order would show (onceonly is what prevents it)."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE)
    carrier_ref = models.CharField(max_length=40)
