"""The Django app: ``INSTALLED_APPS += ["onceonly.django"]``."""
from django.apps import AppConfig


class OnceonlyConfig(AppConfig):
    """onceonly's tables come from its migration (``manage.py migrate``); it has no models."""

    name = "onceonly.django"
    label = "onceonly"
    verbose_name = "onceonly"
