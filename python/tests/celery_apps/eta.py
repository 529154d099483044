"""A Celery app for tests/test_celery_eta.py: Redis broker, a short
visibility timeout swept every second, a guarded task published with a
countdown beyond it (kombu #337)."""
import os

from celery import Celery, signals

from onceonly.celery import guarded_task

DB = os.environ["ONCEONLY_TEST_DB"]
EFFECTS = os.environ["ONCEONLY_TEST_EFFECTS"]

app = Celery("eta", broker=os.environ["ONCEONLY_TEST_REDIS"])
app.conf.update(task_default_queue=os.environ["ONCEONLY_TEST_QUEUE"], broker_connection_retry_on_startup=True,
                broker_transport_options={"visibility_timeout": 3, "unacked_restore_interval": 1,
                                          "unacked_restore_throttle": 1})


def note(line):
    with open(EFFECTS, "a") as f:
        f.write(line + "\n")


@signals.task_prerun.connect
def _delivered(task_id=None, task=None, **_):
    note(f"delivery {task_id}")


@guarded_task(app, db=DB, job="eta_once", key="order_id", effect="keyed", lease="2s", timeout="1s",
              max_retry_delay="1s")
def eta_once(ctx, order_id):
    note(f"effect {order_id}")
    return "sent"
