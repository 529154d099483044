"""A Celery app for tests/test_celery.py, configured from the environment."""
import os

from celery import Celery

import onceonly
from onceonly.celery import guarded_task

DB = os.environ["ONCEONLY_TEST_DB"]
EFFECTS = os.environ["ONCEONLY_TEST_EFFECTS"]  # one line per effect made

app = Celery("behaviour", broker=os.environ["ONCEONLY_TEST_BROKER"], backend="rpc://")
app.conf.update(task_default_queue=os.environ["ONCEONLY_TEST_QUEUE"], worker_prefetch_multiplier=1,
                broker_connection_retry_on_startup=True,
                task_routes={"behaviour.die_once": {"queue": os.environ["ONCEONLY_TEST_QUEUE"] + "-prefork"}})


def effect_made(what):
    with open(EFFECTS, "a") as f:
        f.write(what + "\n")


@guarded_task(app, db=DB, job="receipt", key="order_id", effect="keyed", lease="2s", timeout="1s")
def send_receipt(ctx, order_id, email):
    effect_made(f"receipt {order_id}")
    return {"sent_to": email, "attempt": ctx.attempt}


@guarded_task(app, db=DB, job="charge", key="order_id", effect="opaque", on_stale="hold", lease="2s", timeout="1s")
def charge(ctx, order_id, fail=False):
    effect_made(f"charge {order_id}")
    if fail:
        raise onceonly.PermanentFailure("card declined")
    return "charged"


# Prefork enforces time limits (soft 2s, hard 3s): room for a fresh pool child on a busy machine.
@guarded_task(app, db=DB, job="die_once", key="order_id", effect="keyed", lease="4s", timeout="2s")
def die_once(ctx, order_id):
    """The prefork pool child running it is SIGKILLed after the claim, the first time."""
    import signal

    marker = f"{EFFECTS}.died-{order_id}"
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    effect_made(f"die_once {order_id}")
    return "done"


@guarded_task(app, db=DB, job="flaky", key="order_id", effect="keyed", lease="2s", timeout="1s", max_retries=0)
def flaky(ctx, order_id):
    """Not sent on its first two claims, sent on the third."""
    if ctx.attempt < 3:
        raise onceonly.NotSent(f"destination down (claim {ctx.attempt})")
    effect_made(f"flaky {order_id}")
    return "sent"


@guarded_task(app, db=DB, job="stubborn", key="order_id", effect="keyed", lease="2s", timeout="1s", max_retries=2)
def stubborn(ctx, order_id):
    """Not sent on every call of its first two claims, sent on the third."""
    effect_made(f"stubborn {order_id} claim {ctx.attempt}")
    if ctx.attempt < 3:
        raise onceonly.NotSent(f"destination down (claim {ctx.attempt})")
    return "sent"
