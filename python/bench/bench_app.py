"""The Celery app the benchmark's workers run: the same task body, unguarded and guarded."""
import os

from celery import Celery

from onceonly.celery import guarded_task

app = Celery("onceonly-bench", broker=os.environ["BENCH_BROKER"])
app.conf.update(task_default_queue=os.environ["BENCH_QUEUE"], worker_prefetch_multiplier=16,
                task_acks_late=True, broker_connection_retry_on_startup=True, task_ignore_result=True)
DONE = os.environ["BENCH_DONE"]


def body(order_id):
    """The work both tasks do: note that it ran (one O_APPEND write)."""
    fd = os.open(DONE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"{order_id}\n".encode())
    os.close(fd)
    return {"order": order_id}


@app.task(name="bench.unguarded", acks_late=True, reject_on_worker_lost=True)
def unguarded(order_id):
    return body(order_id)


@guarded_task(app, db=os.environ["BENCH_DB"], job="bench.guarded", key="order_id", effect="keyed",
              lease="30s", timeout="10s", name="bench.guarded")
def guarded(ctx, order_id):
    return body(order_id)
