"""The shop's settings. SHOP_DB_NAME (a SQLite file, default shop.sqlite3),
SHOP_PG_NAME (a PostgreSQL database on SHOP_PG_HOST, user postgres) or
SHOP_MYSQL_NAME (a MySQL/MariaDB database on SHOP_MYSQL_HOST, user root) picks
the database; SHOP_BROKER the Celery broker."""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "onceonly.django",  # onceonly's tables come with `manage.py migrate`
    "orders",
]

if os.environ.get("SHOP_PG_NAME"):
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.postgresql", "NAME": os.environ["SHOP_PG_NAME"],
        "USER": "postgres", "HOST": os.environ.get("SHOP_PG_HOST", "127.0.0.1"), "PORT": "5432",
    }}
elif os.environ.get("SHOP_MYSQL_NAME"):
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.mysql", "NAME": os.environ["SHOP_MYSQL_NAME"],
        "USER": "root", "HOST": os.environ.get("SHOP_MYSQL_HOST", "127.0.0.1"), "PORT": "3306",
        "OPTIONS": {"charset": "utf8mb4"},
    }}
else:
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB_NAME", str(BASE_DIR / "shop.sqlite3")),
        # WAL (as onceonly's own connections set it): readers never wait on
        # a worker's open transaction. IMMEDIATE: an atomic block takes the
        # write lock when it begins, waiting on the timeout, instead of
        # failing busy at its first write.
        "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL", "transaction_mode": "IMMEDIATE", "timeout": 20},
    }}

# Per job type, laid over the decorator's arguments: tune without a code change.
ONCEONLY = {"JOBS": {"ship_order": {"lease": "60s", "timeout": "20s"}}}

CELERY_BROKER_URL = os.environ.get("SHOP_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
CELERY_RESULT_BACKEND = "rpc://"
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("SHOP_QUEUE", "django-shop")
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
