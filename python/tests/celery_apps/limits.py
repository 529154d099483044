"""A Celery app for tests/test_celery_limits.py: guarded tasks whose first run
overruns Celery's soft time limit (the job timeout, 1s), in a prefork worker
(the pool that enforces time limits)."""
import os
import time

from celery import Celery

from onceonly.celery import guarded_task

DB = os.environ["ONCEONLY_TEST_DB"]
EFFECTS = os.environ["ONCEONLY_TEST_EFFECTS"]  # one line per run of an effect

app = Celery("limits", broker=os.environ["ONCEONLY_TEST_BROKER"], backend="rpc://")
app.conf.update(task_default_queue=os.environ["ONCEONLY_TEST_QUEUE"], worker_prefetch_multiplier=1,
                broker_connection_retry_on_startup=True)

def slow_payload(order_id):
    """Work before the claim (300ms): Celery's soft limit counts from the
    task's start, the guard's job timeout from the claim, so the soft limit
    fires while the guard still sees time left."""
    time.sleep(0.3)
    return {"order_id": order_id}


TIMING = dict(lease="4s", timeout="1s", payload=slow_payload)  # soft limit 1s, hard limit 2.5s


def ran(job, key, attempt):
    with open(EFFECTS, "a") as f:
        f.write(f"{job} {key} attempt {attempt}\n")


def overrun_once(job, key):
    """Sleeps past the soft limit on the first run of this key, returns at once after."""
    marker = f"{EFFECTS}.overran-{job}-{key}"
    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(10)


@guarded_task(app, db=DB, job="slow_keyed", key="order_id", effect="keyed", **TIMING)
def slow_keyed(ctx, order_id):
    ran("slow_keyed", order_id, ctx.attempt)
    overrun_once("slow_keyed", order_id)
    return {"attempt": ctx.attempt}


def nothing_found(ctx):
    return None


@guarded_task(app, db=DB, job="slow_lookup", key="order_id", effect="lookup", lookup=nothing_found, **TIMING)
def slow_lookup(ctx, order_id):
    ran("slow_lookup", order_id, ctx.attempt)
    overrun_once("slow_lookup", order_id)
    return {"attempt": ctx.attempt}


@guarded_task(app, db=DB, job="slow_opaque", key="order_id", effect="opaque", on_stale="hold", **TIMING)
def slow_opaque(ctx, order_id):
    ran("slow_opaque", order_id, ctx.attempt)
    overrun_once("slow_opaque", order_id)
    return {"attempt": ctx.attempt}


def local_connection():
    import sqlite3

    from onceonly.stores.sqlite import path_of

    return sqlite3.connect(path_of(DB))


@guarded_task(app, db=DB, job="slow_local", key="order_id", effect="local", connection=local_connection, **TIMING)
def slow_local(ctx, order_id):
    ran("slow_local", order_id, ctx.attempt)
    ctx.conn.execute("CREATE TABLE IF NOT EXISTS shipped (order_id TEXT)")
    ctx.conn.execute("INSERT INTO shipped VALUES (?)", (order_id,))
    overrun_once("slow_local", order_id)
    return {"attempt": ctx.attempt}
