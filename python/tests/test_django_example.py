"""The example Django shop (python/examples/django_shop) runs end to end:
manage.py migrate, a real Celery worker (prefork, 2 children), an order's
task delivered three times, one Shipment row."""
import os
import secrets
import subprocess
import sys
import time

import pytest

from conftest import REPO, need_server
from test_celery import AMQP

SHOP = REPO / "python/examples/django_shop"


@pytest.mark.parametrize("db", ["sqlite", "postgres", "mysql"])
def test_the_django_shop_example_ships_once(db, tmp_path, request):
    need_server(AMQP)
    env = dict(os.environ, SHOP_BROKER=AMQP, SHOP_QUEUE="django-shop-" + secrets.token_hex(4),
               DJANGO_SETTINGS_MODULE="shop.settings")
    if db == "sqlite":
        env["SHOP_DB_NAME"] = str(tmp_path / "shop.sqlite3")
    elif db == "mysql":
        env["SHOP_MYSQL_NAME"] = request.getfixturevalue("mysql_database").rsplit("/", 1)[1]
    else:
        env["SHOP_PG_NAME"] = request.getfixturevalue("pg_database").rsplit("/", 1)[1]

    def manage(*args, **kw):
        return subprocess.run([sys.executable, "manage.py", *args], cwd=SHOP, env=env,
                              capture_output=True, text=True, timeout=120, **kw)

    migrated = manage("migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    log = tmp_path / "worker.log"
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "shop", "worker", "-c", "2",
                               "-Q", env["SHOP_QUEUE"], "-n", f"shop-{env['SHOP_QUEUE']}@%h", "--without-gossip",
                               "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
                              cwd=SHOP, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        out = manage("place_orders")
    finally:
        worker.terminate()
        worker.wait(30)
        from kombu import Connection

        with Connection(AMQP) as conn:
            conn.default_channel.queue_delete(env["SHOP_QUEUE"])
    assert out.returncode == 0, out.stdout + out.stderr + log.read_text()[-3000:]
    assert "3 deliveries" in out.stdout and "shipment rows 1" in out.stdout, out.stdout
    assert "rolled-back order: orders 0, shipments 0" in out.stdout and "shipped once" in out.stdout
