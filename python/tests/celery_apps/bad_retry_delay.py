"""A Celery app whose guarded task's longest retry countdown (the default
max_retry_delay, 1m) is not shorter than the Redis broker's visibility_timeout
(30s): a retry waiting for its countdown would be handed out again."""
import os

from celery import Celery

from onceonly.celery import guarded_task

app = Celery("bad_retry_delay", broker=os.environ["ONCEONLY_TEST_REDIS"])
app.conf.broker_transport_options = {"visibility_timeout": 30}


@guarded_task(app, db=os.environ["ONCEONLY_TEST_DB"], job="report", key="day", lease="20s", timeout="10s")
def build_report(ctx, day):
    return day
