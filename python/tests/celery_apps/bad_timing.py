"""A Celery app whose guarded task breaks a timing rule: the Redis broker's
visibility_timeout (5s) is not longer than the job timeout (10s)."""
import os

from celery import Celery

from onceonly.celery import guarded_task

app = Celery("bad_timing", broker=os.environ["ONCEONLY_TEST_REDIS"])
app.conf.broker_transport_options = {"visibility_timeout": 5}


@guarded_task(app, db=os.environ["ONCEONLY_TEST_DB"], job="report", key="day", lease="30s", timeout="10s")
def build_report(ctx, day):
    return day
