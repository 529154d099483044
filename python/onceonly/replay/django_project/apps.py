from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "onceonly.replay.django_project"
    label = "onceonly_replay"
    default_auto_field = "django.db.models.BigAutoField"
