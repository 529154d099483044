"""The replay's own rows (demo.py's tables), as a Django project has them:
models, created by its migration. The harness counts them by SQL."""
from django.db import models


class Effect(models.Model):
    """One row per local effect made. Not unique on (job, op_key) on purpose: a second write would show."""

    job = models.CharField(max_length=200)
    op_key = models.CharField(max_length=200)
    pid = models.IntegerField(null=True)

    class Meta:
        db_table = "onceonly_replay_effects"


class NaiveMark(models.Model):
    """The naive task's "done" mark, read before it acts."""

    job = models.CharField(max_length=200)
    op_key = models.CharField(max_length=200)

    class Meta:
        db_table = "onceonly_replay_naive"
