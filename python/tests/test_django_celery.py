"""A real Celery worker of the Django project (tests/django_project) on
RabbitMQ and PostgreSQL, SQLite or MariaDB: a worker SIGKILLed between its ORM write and the
commit leaves neither the row nor a record, and the redelivery writes one
row; a task enqueued with delay_on_commit in a block that rolls back never runs."""
import os
import signal
import subprocess
import sys
import time

import pytest

from onceonly import State
from conftest import need_server
from test_django import PROJECT, dj, key, record, shipped  # noqa: F401 (dj: the fixture)

AMQP = os.environ.get("ONCEONLY_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672//")


def start_worker(dj, name, alias="default"):
    need_server(AMQP)
    log_path = os.path.join(dj["markers"], f"{name}.log")
    env = dict(os.environ, **dj["env"], ONCEONLY_TEST_BROKER=AMQP, PYTHONPATH=PROJECT, ONCEONLY_TEST_DJANGO_RECORDS=alias)
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "testproj", "worker", "-P", "solo",
                             "-Q", dj["queue"], "-n", f"{name}-{dj['queue']}@%h", "--without-gossip",
                             "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
                            cwd=PROJECT, env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while " ready." not in open(log_path).read():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the Celery worker did not start:\n{open(log_path).read()[-3000:]}")
        time.sleep(0.1)
    return proc, log_path


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        proc.wait(30)


def wait_for(what, check, seconds=60):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def tasks(dj):
    from shipping import tasks

    yield tasks
    with tasks.app.connection_for_write() as conn:
        conn.default_channel.queue_delete(dj["queue"])


@pytest.mark.parametrize("alias", ["default", "lite", "my"])  # PostgreSQL, SQLite, MariaDB
def test_a_worker_killed_between_the_orm_write_and_the_commit_leaves_neither(dj, tasks, alias):
    k = key()
    first, log1 = start_worker(dj, "first", alias)
    try:
        tasks.ship.delay(k, block_first=True)
        marker = os.path.join(dj["markers"], f"written-{k}")
        wait_for("the ORM write", lambda: os.path.exists(marker))
        assert int(open(marker).read()) == first.pid  # the solo pool: the worker process itself
        # Written but not committed: nothing of it is visible outside.
        assert shipped(alias, k) == 0 and record(alias, "ship", k) is None
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    assert shipped(alias, k) == 0 and record(alias, "ship", k) is None
    second, _ = start_worker(dj, "second", alias)
    try:
        # RabbitMQ hands the unacknowledged message to the next consumer.
        wait_for("the redelivery", lambda: (record(alias, "ship", k) or None) is not None
                 and record(alias, "ship", k).state is State.COMPLETED)
    finally:
        stop(second)
    assert shipped(alias, k) == 1
    r = record(alias, "ship", k)
    # The killed claim never committed: the redelivery's claim is the first.
    assert (r.token, r.attempts) == (1, 1)
    from onceonly.django import store

    assert store(alias).history("ship", k) == []


def test_a_task_enqueued_on_commit_in_a_block_that_rolls_back_never_runs(dj, tasks):
    from django.db import transaction

    class Abandon(Exception):
        pass

    rolled, committed = key(), key()
    worker, _ = start_worker(dj, "oncommit")
    try:
        with pytest.raises(Abandon):
            with transaction.atomic():
                tasks.ship.delay_on_commit(rolled)
                raise Abandon()
        with transaction.atomic():
            tasks.ship.delay_on_commit(committed)
        # One solo worker, one queue, in order: had the first been sent, it
        # would have run before the second completes.
        wait_for("the committed task", lambda: (record("default", "ship", committed) or None) is not None
                 and record("default", "ship", committed).state is State.COMPLETED)
    finally:
        stop(worker)
    assert shipped("default", committed) == 1
    assert shipped("default", rolled) == 0 and record("default", "ship", rolled) is None
