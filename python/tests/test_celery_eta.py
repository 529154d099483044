"""kombu #337 through a real worker on Redis: a guarded task published with a
countdown beyond the visibility timeout is delivered several times; the
publish warns, and the guard makes the effect once."""
import os
import secrets
import subprocess
import sys
import time

import pytest

import onceonly
from conftest import need_server
from test_celery import HERE, REDIS


def test_a_countdown_past_the_visibility_timeout_is_delivered_again_and_the_effect_made_once(tmp_path, caplog):
    need_server(REDIS)
    env = dict(os.environ, ONCEONLY_TEST_DB=f"sqlite:///{tmp_path}/ops.db", ONCEONLY_TEST_EFFECTS=str(tmp_path / "effects.txt"),
               ONCEONLY_TEST_REDIS=REDIS, ONCEONLY_TEST_QUEUE="celery-eta-" + secrets.token_hex(4),
               PYTHONPATH=os.path.join(HERE, "celery_apps"))
    store = onceonly.connect(env["ONCEONLY_TEST_DB"])
    store.migrate()
    log = open(tmp_path / "worker.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "eta", "worker", "-P", "solo",
                             "-n", f"eta-{secrets.token_hex(4)}@%h", "--without-gossip", "--without-mingle",
                             "--without-heartbeat", "--loglevel", "INFO"], env=env, stdout=log, stderr=subprocess.STDOUT)
    saved = {k: os.environ.get(k) for k in ("ONCEONLY_TEST_DB", "ONCEONLY_TEST_EFFECTS", "ONCEONLY_TEST_QUEUE", "ONCEONLY_TEST_REDIS")}
    os.environ.update({k: env[k] for k in saved})
    sys.path.insert(0, os.path.join(HERE, "celery_apps"))
    import eta

    try:
        deadline = time.monotonic() + 60
        while " ready." not in (tmp_path / "worker.log").read_text():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.1)
        with caplog.at_level("WARNING", logger="onceonly.celery"):
            eta.eta_once.apply_async(("o-1",), countdown=10)
        assert "job eta_once: task eta.eta_once is published to run in 10s, not less than the queue redelivery timeout (3s)" in caplog.text
        deadline = time.monotonic() + 60
        while not (store.get("eta_once", "o-1") and store.get("eta_once", "o-1").record.state is onceonly.State.COMPLETED):
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(4)  # the copies handed out meanwhile come due too
    finally:
        proc.terminate()
        proc.wait(30)
        with eta.app.connection_for_write() as conn:
            conn.default_channel.queue_delete(env["ONCEONLY_TEST_QUEUE"])
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    lines = (tmp_path / "effects.txt").read_text().splitlines()
    deliveries = [line for line in lines if line.startswith("delivery ")]
    print(f"kombu #337: {len(deliveries)} deliveries of one task published with countdown 10s, visibility_timeout 3s")
    assert len(deliveries) >= 2, lines  # the broker handed it out again
    assert len(set(deliveries)) == 1  # the same message each time
    assert lines.count("effect o-1") == 1
    rec = store.get("eta_once", "o-1").record
    assert (rec.state, rec.attempts) == (onceonly.State.COMPLETED, 1)
