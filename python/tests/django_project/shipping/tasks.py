"""The test project's guarded tasks (local effects through the ORM)."""
import os
import time

from testproj.celery import app

from onceonly.django.celery import guarded_task
from shipping.models import Shipment

MARKERS = os.environ.get("ONCEONLY_TEST_MARKERS", "/tmp")


@guarded_task(app, job="ship", key="order_id", lease="30s", timeout="20s")
def ship(ctx, order_id, block_first=False):
    """Writes a Shipment. With ``block_first``, the first delivery stops after
    the ORM write, before the commit, says so in a marker file holding its
    pid, and waits there for the test to SIGKILL it."""
    Shipment.objects.using(ctx.conn.alias).create(order_id=order_id)
    marker = os.path.join(MARKERS, f"written-{order_id}")
    if block_first and not os.path.exists(marker):
        with open(marker + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(marker + ".tmp", marker)
        time.sleep(120)
    return {"shipped": order_id}
