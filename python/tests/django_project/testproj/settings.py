"""Settings of the test project, from the environment the tests set:
ONCEONLY_TEST_DJANGO_DB (the default database), ONCEONLY_TEST_DJANGO_SQLITE
(an optional second alias "lite"), ONCEONLY_TEST_DJANGO_MYSQL (an optional
third alias "my"), ONCEONLY_TEST_BROKER and ONCEONLY_TEST_QUEUE."""
import os

from testproj.dburl import database

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = ["onceonly.django", "shipping"]
DATABASES = {"default": database(os.environ["ONCEONLY_TEST_DJANGO_DB"])}
if os.environ.get("ONCEONLY_TEST_DJANGO_SQLITE"):
    DATABASES["lite"] = database(os.environ["ONCEONLY_TEST_DJANGO_SQLITE"])
if os.environ.get("ONCEONLY_TEST_DJANGO_MYSQL"):
    DATABASES["my"] = database(os.environ["ONCEONLY_TEST_DJANGO_MYSQL"])
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ONCEONLY_TEST_DJANGO_RECORDS: the alias a worker keeps records on (and runs local effects on).
ONCEONLY = {"DATABASE": os.environ.get("ONCEONLY_TEST_DJANGO_RECORDS", "default"),
            "JOBS": {"ship_tuned": {"lease": "45s", "timeout": "15s"}}}

CELERY_BROKER_URL = os.environ.get("ONCEONLY_TEST_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("ONCEONLY_TEST_QUEUE", "django-test")
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
