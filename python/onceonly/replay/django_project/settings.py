"""The replay project's settings, from the run's config file (env
ONCEONLY_REPLAY_CONFIG, written by the harness): the database under test as
Django's ``default``, the Celery settings as ``CELERY_*`` and every guarded
job's timing and policy in ``ONCEONLY['JOBS']``, where a project keeps them."""
import json
import os

from onceonly.replay.django_project.dburl import database
from onceonly.replay.kinds import KINDS, job_of, transport_options

CONFIG = json.load(open(os.environ["ONCEONLY_REPLAY_CONFIG"]))

SECRET_KEY = "onceonly-replay"
USE_TZ = True
INSTALLED_APPS = ["onceonly.django", "onceonly.replay.django_project"]
DATABASES = {"default": database(CONFIG["db"])}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

ONCEONLY = {
    "DATABASE": "default",
    "JOBS": {job_of(CONFIG["run_id"], kind): {"on_stale": on_stale, "lease": CONFIG["lease"], "timeout": CONFIG["timeout"]}
             for kind, (_effect, on_stale, _dest) in KINDS.items()},
}

CELERY_BROKER_URL = CONFIG["broker"]
CELERY_TASK_DEFAULT_QUEUE = CONFIG["queue"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_BROKER_TRANSPORT_OPTIONS = transport_options(CONFIG["visibility_timeout_s"])
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
