"""The Celery app the benchmark's workers run: the same task body, unguarded,
guarded, and with the guard's own two statements run raw (no guard logic).

Each process counts the statements it sends (the store's and the raw task's),
and times guard.run, the statements inside it and the body, and writes the
running totals on every line of the done file, so the driver can print them
per task without a write of its own."""
import os
import time

import psycopg
from celery import Celery

from onceonly import Guard, Payload, State
from onceonly.celery import guarded_task
from onceonly.stores import params
from onceonly.stores.params import OpMove
from onceonly.stores.postgres import PgStore, statement

app = Celery("onceonly-bench", broker=os.environ["BENCH_BROKER"])
app.conf.update(task_default_queue=os.environ["BENCH_QUEUE"], worker_prefetch_multiplier=16,
                task_acks_late=True, broker_connection_retry_on_startup=True, task_ignore_result=True)
DONE = os.environ["BENCH_DONE"]
DB = os.environ["BENCH_DB"]
SENT = [0]  # statements this process sent
# Seconds this process spent in guard.run, in the store's statements, in the body.
IN_GUARD, IN_STATEMENTS, IN_BODY = [0.0], [0.0], [0.0]

_store_run = PgStore._run
_guard_run = Guard.run


def _counted_run(self, conn, name, args):
    SENT[0] += 1
    t0 = time.perf_counter()
    try:
        return _store_run(self, conn, name, args)
    finally:
        IN_STATEMENTS[0] += time.perf_counter() - t0


def _timed_guard_run(self, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return _guard_run(self, *args, **kwargs)
    finally:
        IN_GUARD[0] += time.perf_counter() - t0


PgStore._run = _counted_run
Guard.run = _timed_guard_run


def body(order_id):
    """The work every task does: note that it ran (one O_APPEND write), with
    this process's statement count so far."""
    t0 = time.perf_counter()
    fd = os.open(DONE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"{order_id} {os.getpid()} {SENT[0]} {IN_GUARD[0]:.6f} {IN_STATEMENTS[0]:.6f} {IN_BODY[0]:.6f}\n".encode())
    os.close(fd)
    IN_BODY[0] += time.perf_counter() - t0
    return {"order": order_id}


@app.task(name="bench.unguarded", acks_late=True, reject_on_worker_lost=True)
def unguarded(order_id):
    return body(order_id)


@guarded_task(app, db=DB, job="bench.guarded", key="order_id", effect="keyed",
              lease="30s", timeout="10s", name="bench.guarded")
def guarded(ctx, order_id):
    return body(order_id)


_raw = {}


def _raw_conn():
    """One connection per process, as the guard's store keeps."""
    if _raw.get("pid") != os.getpid():
        _raw.update(pid=os.getpid(), conn=psycopg.connect(DB, autocommit=True))
    return _raw["conn"]


@app.task(name="bench.raw", acks_late=True, reject_on_worker_lost=True)
def raw(order_id):
    """claim.sql, the body, move.sql (completion) through psycopg: what the guard
    must send per task, with none of its logic."""
    payload = Payload.of({"args": [order_id], "kwargs": {}})
    with psycopg.RawCursor(_raw_conn()) as cur:
        SENT[0] += 1
        cur.execute(statement("claim", "onceonly"),
                    params.claim(0, "bench.raw", order_id, "bench", payload.fingerprint, payload.json, 30_000))
        token = cur.fetchone()[0]
        result = body(order_id)
        SENT[0] += 1
        cur.execute(statement("move", "onceonly"),
                    params.move(0, OpMove("bench.raw", order_id, token, State.CLAIMED, State.COMPLETED,
                                          result='{"order":"%s"}' % order_id), bool))
        assert cur.rowcount == 1
    return result
