"""The example app runs end to end: every task delivered three times, every effect once."""
import subprocess
import sys

from conftest import REPO, need_server
from test_celery import AMQP


def test_the_shop_example_runs(tmp_path):
    need_server(AMQP)
    out = subprocess.run([sys.executable, "demo.py", "--broker", AMQP, "--db", f"sqlite:///{tmp_path}/shop.db"],
                         cwd=REPO / "python/examples/shop", capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "order-1001: receipts sent 1, cards charged 1, shipment rows 1" in out.stdout
    assert "every effect happened once" in out.stdout
