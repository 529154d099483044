"""The project's Celery app, configured from Django settings (``CELERY_*``), as a Django project's ``celery.py``."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onceonly.replay.django_project.settings")

app = Celery("onceonly-replay-django")
app.config_from_object("django.conf:settings", namespace="CELERY")
