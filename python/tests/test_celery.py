"""Celery integration through a real worker process and a real broker:
what each outcome does to the message, and the timing check at start."""
import os
import secrets
import subprocess
import sys
import time

import pytest

import onceonly
from onceonly import Payload
from onceonly.celery import OperationFailed, OperationHeld, guarded_task, timing_problems
from conftest import need_server

HERE = os.path.dirname(__file__)
AMQP = os.environ.get("ONCEONLY_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672//")
REDIS = os.environ.get("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/14")



def test_timing_problems_name_the_job_both_values_and_the_setting():
    from celery import Celery

    app = Celery("t", broker="redis://127.0.0.1:6379/14")
    app.conf.broker_transport_options = {"visibility_timeout": 5}
    guarded_task(app, db="sqlite:///x.db", job="report", key="day", lease="30s", timeout="10s")(lambda ctx, day: day)
    vt = 'broker_transport_options["visibility_timeout"]'
    assert timing_problems(app) == [
        f"job report: queue redelivery timeout (5s) must be longer than the job timeout (10s) [change {vt} or timeout]",
        "job report: queue redelivery timeout (5s) must be longer than the guard's longest retry delay (1m), or the "
        f"broker hands a retry waiting for its countdown to another worker [change {vt} or max_retry_delay]",
    ]
    app.conf.broker_transport_options = {"visibility_timeout": 3600}
    assert timing_problems(app) == []
    amqp = Celery("t2", broker=AMQP)
    guarded_task(amqp, db="sqlite:///x.db", job="r", key="day", lease="1h", timeout="40m")(lambda ctx, day: day)
    assert timing_problems(amqp) == [
        "job r: queue redelivery timeout (30m) must be longer than the job timeout (40m) "
        "[change RabbitMQ's consumer_timeout, then onceonly_redelivery_timeout or timeout]"]


def test_the_guard_s_longest_retry_delay_must_be_shorter_than_the_visibility_timeout():
    """kombu's Redis transport hands an unacknowledged message out again after
    the visibility timeout; a retry waiting for its countdown is one."""
    from celery import Celery

    app = Celery("t", broker="redis://127.0.0.1:6379/14")
    app.conf.broker_transport_options = {"visibility_timeout": 30}
    guarded_task(app, db="sqlite:///x.db", job="report_delay", key="day", lease="20s", timeout="10s")(lambda ctx, day: day)
    (rule,) = timing_problems(app)
    assert "queue redelivery timeout (30s) must be longer than the guard's longest retry delay (1m)" in rule
    shorter = Celery("t3", broker="redis://127.0.0.1:6379/14")
    shorter.conf.broker_transport_options = {"visibility_timeout": 30}
    guarded_task(shorter, db="sqlite:///x.db", job="report_shorter", key="day", lease="20s", timeout="10s",
                 max_retry_delay="20s")(lambda ctx, day: day)
    assert timing_problems(shorter) == []
    with pytest.raises(onceonly.InvalidInput, match=r"max_retry_delay \(0s\) must be above zero"):
        guarded_task(shorter, db="sqlite:///x.db", job="z", key="day", max_retry_delay=0)


def test_every_countdown_the_guard_gives_is_at_most_max_retry_delay(sqlite_store, monkeypatch):
    from celery import Celery

    app = Celery("t")
    task = guarded_task(app, db=sqlite_store, job="capped", key="k", max_retry_delay="2s")(lambda ctx, k: k)
    sqlite_store.enqueue("capped", "o-1", Payload.of({"args": ["o-1"], "kwargs": {}}), delay_ms=50_000)

    class Retried(Exception):
        pass

    countdowns = []

    def retry(exc=None, countdown=None, **kw):
        countdowns.append(countdown)
        return Retried()

    monkeypatch.setattr(task, "retry", retry)
    with pytest.raises(Retried):
        task("o-1")  # not due for 50s
    assert countdowns == [2.0]


def test_a_guarded_task_published_beyond_the_visibility_timeout_is_warned(caplog):
    need_server(REDIS)
    from celery import Celery

    app = Celery("eta", broker=REDIS)
    app.conf.broker_transport_options = {"visibility_timeout": 5}
    app.conf.task_default_queue = "celery-eta-" + secrets.token_hex(4)
    task = guarded_task(app, db="sqlite:///x.db", job="eta_report", key="day", lease="3s", timeout="1s",
                        max_retry_delay="2s")(lambda ctx, day: day)
    try:
        with caplog.at_level("WARNING", logger="onceonly.celery"):
            task.apply_async(("d-1",), countdown=2)
            assert "kombu #337" not in caplog.text
            task.apply_async(("d-2",), countdown=60)
        assert "onceonly: job eta_report: task " in caplog.text and "is published to run in 1m," in caplog.text, caplog.text
        assert "not less than the queue redelivery timeout (5s)" in caplog.text
        assert 'broker_transport_options["visibility_timeout"]' in caplog.text
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(app.conf.task_default_queue)
            conn.default_channel.queue_delete(app.conf.task_default_queue)


def test_time_limits_soft_at_the_timeout_hard_before_the_lease():
    from celery import Celery

    app = Celery("t")
    task = guarded_task(app, db="sqlite:///x.db", job="a", key="k", lease="30s", timeout="10s")(lambda ctx, k: k)
    assert (task.soft_time_limit, task.time_limit) == (10, 20)
    long = guarded_task(app, db="sqlite:///x.db", job="b", key="k", lease="30s", timeout="5m", heartbeat="10s")(lambda ctx, k: k)
    assert (long.soft_time_limit, long.time_limit) == (300, 315)


@pytest.mark.parametrize("error", ["database", "soft time limit"])
def test_an_error_after_the_claim_retries_the_task_not_drops_it(sqlite_store, monkeypatch, error):
    # A task failing with an error would be acknowledged, and its claim never
    # revisited (nothing in Celery sweeps stale claims as the Rust relay does):
    # a claim past its lease must come back for the policy to decide.
    from celery import Celery

    app = Celery("t")
    task = guarded_task(app, db=sqlite_store, job="dberr", key="k")(lambda ctx, k: {"sent": k})

    from celery.exceptions import SoftTimeLimitExceeded

    # The soft limit is a signal: it can land in the completion write too.
    raised = onceonly.DatabaseError("move.sql: database is locked") if error == "database" else SoftTimeLimitExceeded()

    def broken(*a, **kw):
        raise raised

    class Retried(Exception):
        pass

    retried = {}

    def retry(exc=None, countdown=None, **kw):
        retried.update(exc=exc, countdown=countdown)
        return Retried()

    monkeypatch.setattr(sqlite_store, "move", broken)
    monkeypatch.setattr(task, "retry", retry)
    with pytest.raises(Retried):
        task("o-1")
    assert retried["exc"] is raised and retried["countdown"] > 0
    assert sqlite_store.get("dberr", "o-1").record.state is onceonly.State.CLAIMED


def test_bad_settings_are_refused_when_the_task_is_defined():
    from celery import Celery

    app = Celery("t")
    with pytest.raises(onceonly.UnknownEffectKind):
        guarded_task(app, db="sqlite:///x.db", job="a", key="k", effect="email")
    with pytest.raises(onceonly.InvalidKey, match="not an argument"):
        guarded_task(app, db="sqlite:///x.db", job="a", key="order")(lambda ctx, order_id: 1)
    with pytest.raises(onceonly.TimingError, match=r"job timeout \(30s\) must be shorter than the lease \(30s\)"):
        guarded_task(app, db="sqlite:///x.db", job="a", key="k", timeout="30s")


@pytest.mark.parametrize("module, rule", [
    ("bad_timing", "job report: queue redelivery timeout (5s) must be longer than the job timeout (10s) "
                   '[change broker_transport_options["visibility_timeout"] or timeout]'),
    ("bad_retry_delay", "job report: queue redelivery timeout (30s) must be longer than the guard's longest retry "
                        "delay (1m), or the broker hands a retry waiting for its countdown to another worker "
                        '[change broker_transport_options["visibility_timeout"] or max_retry_delay]'),
])
def test_a_worker_breaking_a_timing_rule_refuses_to_start(tmp_path, module, rule):
    need_server(REDIS)
    env = dict(os.environ, ONCEONLY_TEST_REDIS=REDIS, ONCEONLY_TEST_DB=f"sqlite:///{tmp_path}/x.db", PYTHONPATH=os.path.join(HERE, "celery_apps"))
    out = subprocess.run([sys.executable, "-m", "celery", "-A", module, "worker", "-P", "solo", "--without-gossip",
                          "-n", f"bad-timing-{secrets.token_hex(4)}@%h",
                          "--without-mingle", "--without-heartbeat"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert "onceonly: the worker refuses to start: timing rule broken: " + rule in said, said


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    need_server(AMQP)
    d = tmp_path_factory.mktemp("celery")
    env = dict(os.environ, ONCEONLY_TEST_DB=f"sqlite:///{d}/ops.db", ONCEONLY_TEST_EFFECTS=str(d / "effects.txt"),
               ONCEONLY_TEST_BROKER=AMQP, ONCEONLY_TEST_QUEUE="onceonly-test-" + secrets.token_hex(4),
               PYTHONPATH=os.path.join(HERE, "celery_apps"))
    os.environ.update({k: env[k] for k in ("ONCEONLY_TEST_DB", "ONCEONLY_TEST_EFFECTS", "ONCEONLY_TEST_BROKER", "ONCEONLY_TEST_QUEUE")})
    sys.path.insert(0, os.path.join(HERE, "celery_apps"))
    import behaviour

    log = open(d / "worker.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "behaviour", "worker", "-P", "solo", "--without-gossip",
                             "-n", f"test-{secrets.token_hex(4)}@%h",
                             "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    store = onceonly.connect(env["ONCEONLY_TEST_DB"])
    store.migrate()
    deadline = time.monotonic() + 60
    while " ready." not in (d / "worker.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the Celery worker did not start:\n" + (d / "worker.log").read_text()[-3000:])
        time.sleep(0.1)
    yield behaviour, store, d
    proc.terminate()
    proc.wait(20)
    with behaviour.app.connection_for_write() as conn:
        conn.default_channel.queue_delete(env["ONCEONLY_TEST_QUEUE"])


def effects(d, what):
    path = d / "effects.txt"
    return path.read_text().splitlines().count(what) if path.exists() else 0


def test_a_repeat_returns_the_stored_result(worker):
    app, store, d = worker
    first = app.send_receipt.delay("o-1", "a@example.com").get(timeout=30)
    again = app.send_receipt.delay("o-1", "a@example.com").get(timeout=30)
    assert first == again == {"sent_to": "a@example.com", "attempt": 1}
    assert effects(d, "receipt o-1") == 1


def test_in_progress_elsewhere_retries_with_a_countdown_then_takes_over(worker):
    app, store, d = worker
    payload = Payload.of({"args": ["o-2", "b@example.com"], "kwargs": {}})
    store.claim("receipt", "o-2", "another-worker:1:0", payload, 1500)  # live for 1.5s, then stale
    started = time.monotonic()
    result = app.send_receipt.delay("o-2", "b@example.com").get(timeout=30)
    took = time.monotonic() - started
    assert result == {"sent_to": "b@example.com", "attempt": 2}
    assert 1.3 < took < 10, took  # waited for the lease, without spinning
    log = (d / "worker.log").read_text()
    retries = log.count("receipt:o-2 in progress at another-worker:1:0; retrying in")
    assert 1 <= retries <= 2, log[-2000:]
    assert [e.event for e in store.history("receipt", "o-2")] == ["take_over"]
    assert effects(d, "receipt o-2") == 1


def test_each_retry_of_a_task_is_in_the_history(worker):
    """Not sent twice, then sent: Celery retries the task after each backoff,
    and the history shows both retries with their attempt and reason."""
    app, store, d = worker
    assert app.flaky.delay("o-9").get(timeout=30) == "sent"
    assert [(e.event, e.attempt, e.detail, e.retry_after_ms) for e in store.history("flaky", "o-9")] == [
        ("retry", 1, "destination down (claim 1)", 500),
        ("retry", 2, "destination down (claim 2)", 1000),
    ]
    assert effects(d, "flaky o-9") == 1


def test_max_retries_bounds_the_calls_under_one_claim_then_celery_retries_the_task(worker):
    """max_retries=2: three calls under each claim; when they run out the
    claim is released (recorded in the history) and the task retried after
    the backoff, with no limit of Celery's own, until the effect is done."""
    app, store, d = worker
    assert app.stubborn.max_retries is None
    assert app.stubborn.delay("o-10").get(timeout=30) == "sent"
    assert [effects(d, f"stubborn o-10 claim {n}") for n in (1, 2, 3)] == [3, 3, 1]
    assert [(e.event, e.attempt, e.detail) for e in store.history("stubborn", "o-10")] == [
        ("retry", 1, "destination down (claim 1)"),
        ("retry", 2, "destination down (claim 2)"),
    ]
    rec = store.get("stubborn", "o-10").record
    assert (rec.state, rec.attempts) == (onceonly.State.COMPLETED, 3)


def test_held_is_not_retried_and_logged_with_job_and_key(worker):
    app, store, d = worker
    payload = Payload.of({"args": ["o-3"], "kwargs": {}})
    store.claim("charge", "o-3", "dead-worker:1:0", payload, 1)
    time.sleep(0.05)
    with pytest.raises(OperationHeld, match="charge:o-3 is held"):
        app.charge.delay("o-3").get(timeout=30)
    time.sleep(1)
    assert effects(d, "charge o-3") == 0
    assert "onceonly: charge:o-3 is held for a person, not retried" in (d / "worker.log").read_text()
    assert store.get("charge", "o-3").record.state is onceonly.State.HELD


def test_a_permanent_failure_is_not_retried(worker):
    app, store, d = worker
    with pytest.raises(OperationFailed, match="card declined"):
        app.charge.delay("o-4", fail=True).get(timeout=30)
    time.sleep(1)
    assert effects(d, "charge o-4") == 1
    assert store.get("charge", "o-4").record.state is onceonly.State.FAILED


def test_a_bad_key_fails_the_task_naming_the_problem_and_writes_nothing(worker):
    app, store, d = worker
    with pytest.raises(onceonly.InvalidKey, match="control character U\\+000A"):
        app.send_receipt.delay("o-5\nx", "e@example.com").get(timeout=30)
    assert store.get("receipt", "o-5\nx") is None and effects(d, "receipt o-5\nx") == 0


def test_a_killed_prefork_child_s_message_comes_back_and_the_claim_is_taken_over(worker):
    """acks_late + reject_on_worker_lost: the pool child dies (SIGKILL) after the
    claim; its message returns to the broker and is redelivered; the claim is
    live until its lease, then taken over and the effect made once."""
    app, store, d = worker
    log = open(d / "prefork.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "behaviour", "worker", "-P", "prefork", "-c", "1",
                             "-Q", os.environ["ONCEONLY_TEST_QUEUE"] + "-prefork", "-n", f"prefork-{secrets.token_hex(4)}@%h",
                             "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
                            env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "celery_apps")), stdout=log, stderr=subprocess.STDOUT)
    try:
        app.die_once.delay("o-7")
        # Not .get(): when the hard time limit notices the dead child first,
        # Celery stores TimeLimitExceeded as the result before it requeues.
        deadline = time.monotonic() + 60
        while not (store.get("die_once", "o-7") and store.get("die_once", "o-7").record.state is onceonly.State.COMPLETED):
            assert time.monotonic() < deadline, "the redelivered message never completed the operation"
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(20)
        with app.app.connection_for_write() as conn:
            conn.default_channel.queue_delete(os.environ["ONCEONLY_TEST_QUEUE"] + "-prefork")
    said = (d / "prefork.log").read_text()
    # The pool notices the dead child (WorkerLostError), or, on a busy machine,
    # its hard time limit fires first: either way the message goes back.
    assert "WorkerLostError" in said or "Hard time limit" in said, said[-2000:]
    rec = store.get("die_once", "o-7").record
    assert (rec.state, rec.token, rec.attempts) == (onceonly.State.COMPLETED, 2, 2)
    assert [e.event for e in store.history("die_once", "o-7")] == ["take_over"]
    assert effects(d, "die_once o-7") == 1
