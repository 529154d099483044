"""The example app runs end to end: every task delivered three times, every effect once."""
import subprocess
import sys

from conftest import REPO
from test_celery import AMQP, reachable


def test_the_shop_example_runs(tmp_path):
    reachable(AMQP, 5672)
    out = subprocess.run([sys.executable, "demo.py", "--broker", AMQP, "--db", f"sqlite:///{tmp_path}/shop.db"],
                         cwd=REPO / "python/examples/shop", capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "order-1001: receipts sent 1, cards charged 1, shipment rows 1" in out.stdout
    assert "every effect happened once" in out.stdout
