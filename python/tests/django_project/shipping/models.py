from django.db import models


class Shipment(models.Model):
    """One row per shipment made: the tests count them. Not unique on
    order_id on purpose, so a second write would show."""

    order_id = models.CharField(max_length=100)
