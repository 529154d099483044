"""Celery's soft time limit through a real prefork worker (the pool that
enforces it): an effect stopped at the limit is recorded as its kind says
(unknown: keyed and lookup released for the next claim, opaque/hold held)
and never run again in the same process under the same claim; a local effect
stopped there is rolled back and the task retried."""
import os
import secrets
import sqlite3
import subprocess
import sys
import time

import pytest

import onceonly
from onceonly.stores.sqlite import path_of
from conftest import need_server
from test_celery import AMQP, HERE


@pytest.fixture(scope="module")
def prefork(tmp_path_factory):
    need_server(AMQP)
    d = tmp_path_factory.mktemp("limits")
    env = dict(os.environ, ONCEONLY_TEST_DB=f"sqlite:///{d}/ops.db", ONCEONLY_TEST_EFFECTS=str(d / "effects.txt"),
               ONCEONLY_TEST_BROKER=AMQP, ONCEONLY_TEST_QUEUE="onceonly-limits-" + secrets.token_hex(4),
               PYTHONPATH=os.path.join(HERE, "celery_apps"))
    store = onceonly.connect(env["ONCEONLY_TEST_DB"])
    store.migrate()
    log = open(d / "worker.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "limits", "worker", "-P", "prefork", "-c", "1",
                             "-n", f"limits-{secrets.token_hex(4)}@%h", "--without-gossip",
                             "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while " ready." not in (d / "worker.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the Celery worker did not start:\n" + (d / "worker.log").read_text()[-3000:])
        time.sleep(0.1)
    saved = {k: os.environ.get(k) for k in ("ONCEONLY_TEST_DB", "ONCEONLY_TEST_EFFECTS", "ONCEONLY_TEST_BROKER", "ONCEONLY_TEST_QUEUE")}
    os.environ.update({k: env[k] for k in saved})
    sys.path.insert(0, os.path.join(HERE, "celery_apps"))
    import limits

    yield limits, store, d
    proc.terminate()
    proc.wait(30)
    with limits.app.connection_for_write() as conn:
        conn.default_channel.queue_delete(env["ONCEONLY_TEST_QUEUE"])
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def runs(d, job, key):
    path = d / "effects.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" attempt ")[1] for line in lines if line.startswith(f"{job} {key} attempt ")]


def settled(store, job, key, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        snap = store.get(job, key)
        if snap and snap.record.state not in (onceonly.State.CLAIMED, onceonly.State.QUEUED):
            return snap.record
        assert time.monotonic() < deadline, f"{job}:{key} never settled: {snap}"
        time.sleep(0.1)


@pytest.mark.parametrize("job", ["slow_keyed", "slow_lookup"])
def test_a_keyed_or_lookup_effect_stopped_at_the_soft_limit_is_unknown_and_redone_by_the_next_claim(prefork, job):
    app, store, d = prefork
    key = f"{job}-1"
    assert getattr(app, job).delay(key).get(timeout=60) == {"attempt": 2}
    # Once per claim: the stopped run under claim 1, the redo under claim 2
    # (before the fix: twice under claim 1, in the same process).
    assert runs(d, job, key) == ["1", "2"]
    rec = settled(store, job, key)
    assert (rec.state, rec.attempts) == (onceonly.State.COMPLETED, 2)
    (retry,) = store.history(job, key)
    assert (retry.event, retry.attempt) == ("retry", 1)
    assert "SoftTimeLimitExceeded" in retry.detail, retry.detail


def test_an_opaque_effect_stopped_at_the_soft_limit_is_held_not_redone(prefork):
    app, store, d = prefork
    with pytest.raises(onceonly.celery.OperationHeld, match="slow_opaque:slow_opaque-1 is held"):
        app.slow_opaque.delay("slow_opaque-1").get(timeout=60)
    assert runs(d, "slow_opaque", "slow_opaque-1") == ["1"]
    rec = settled(store, "slow_opaque", "slow_opaque-1")
    assert (rec.state, rec.attempts) == (onceonly.State.HELD, 1)
    assert "SoftTimeLimitExceeded" in rec.error, rec.error


def test_a_local_effect_stopped_at_the_soft_limit_is_rolled_back_and_retried(prefork):
    app, store, d = prefork
    assert app.slow_local.delay("slow_local-1").get(timeout=60) == {"attempt": 1}
    # The stopped run's claim and row rolled back: the retry claims afresh.
    assert runs(d, "slow_local", "slow_local-1") == ["1", "1"]
    rec = settled(store, "slow_local", "slow_local-1")
    assert (rec.state, rec.attempts) == (onceonly.State.COMPLETED, 1)
    with sqlite3.connect(path_of(os.environ["ONCEONLY_TEST_DB"])) as conn:
        assert conn.execute("SELECT count(*) FROM shipped WHERE order_id = 'slow_local-1'").fetchone() == (1,)
    assert "slow_local:slow_local-1: the effect was stopped at the soft time limit" in (d / "worker.log").read_text()
