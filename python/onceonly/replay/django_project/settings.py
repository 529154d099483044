"""The replay project's settings, from the run's config file (env
ONCEONLY_REPLAY_CONFIG, written by the harness): the database under test as
Django's ``default``, the Celery settings as ``CELERY_*`` and every guarded
job's timing and policy in ``ONCEONLY['JOBS']``, where a project keeps them."""
import json
import os
from urllib.parse import unquote, urlparse

from onceonly.replay.kinds import KINDS, job_of, transport_options


def database(url: str) -> dict:
    """A Django ``DATABASES`` entry for the replay's ``--db`` URL."""
    if url.startswith("sqlite:///"):
        # As onceonly's own SQLite connections: WAL, and an atomic block takes the write lock when it begins.
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": "/" + url[len("sqlite:///"):].lstrip("/"),
                "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL", "transaction_mode": "IMMEDIATE", "timeout": 30}}
    u = urlparse(url)
    if u.query:
        raise ValueError(f"{u.scheme}:// URL with options ({u.query}): the Django replay takes none; "
                         "put them in the project's DATABASES OPTIONS")
    engine = {"mysql": "mysql", "mariadb": "mysql", "postgres": "postgresql", "postgresql": "postgresql"}.get(u.scheme)
    if engine is None:
        raise ValueError(f"{url!r}: the Django replay runs on sqlite:///, postgresql:// or mysql://")
    entry = {"ENGINE": f"django.db.backends.{engine}", "NAME": unquote(u.path.lstrip("/")),
             "USER": unquote(u.username or ""), "PASSWORD": unquote(u.password or ""),
             "HOST": u.hostname or "", "PORT": str(u.port or "")}
    if engine == "mysql":
        entry["OPTIONS"] = {"charset": "utf8mb4"}  # Django's MySQL backend (mysqlclient), as an application sets it
    return entry


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
