"""How long a SIGKILLed worker's message takes to come back on the Redis
broker: a solo worker takes a task and is SIGKILLed mid-task, another is
started at once, and the time until the task starts again is printed, with
kombu's default sweep (unacked_restore_interval 10 x unacked_restore_throttle
10) and with 1 x 1. docs/celery.md quotes the figures.

    .venv/python/bin/python python/bench/redis_redelivery.py --broker redis://127.0.0.1:6379/5

This file is also the Celery app the workers run (-A redis_redelivery).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid

from celery import Celery

HERE = os.path.dirname(os.path.abspath(__file__))
VISIBILITY_TIMEOUT_S = 10

app = Celery("redis_redelivery", broker=os.environ.get("REDELIVERY_BROKER", "redis://127.0.0.1:6379/5"))
app.conf.update(broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S,
                                          **json.loads(os.environ.get("REDELIVERY_OPTIONS", "{}"))},
                task_default_queue=os.environ.get("REDELIVERY_QUEUE", "celery-redelivery"),
                worker_prefetch_multiplier=1, broker_connection_retry_on_startup=True)


@app.task(acks_late=True, reject_on_worker_lost=True)
def slow():
    """Notes when it starts, then waits to be killed."""
    with open(os.environ["REDELIVERY_MARKS"], "a") as f:
        f.write(f"{time.time()} {os.getpid()}\n")
    time.sleep(600)


def starts(marks):
    return open(marks).read().splitlines() if os.path.exists(marks) else []


def measure(broker, label, options):
    queue = "celery-redelivery-" + uuid.uuid4().hex[:6]
    marks = f"/tmp/{queue}.marks"
    env = dict(os.environ, REDELIVERY_BROKER=broker, REDELIVERY_QUEUE=queue, REDELIVERY_MARKS=marks,
               REDELIVERY_OPTIONS=json.dumps(options), PYTHONPATH=HERE)

    def worker(name):
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "redis_redelivery", "worker", "-P", "solo",
                                 "-n", f"{name}-{queue}@%h", "--without-gossip", "--without-mingle",
                                 "--without-heartbeat", "-l", "WARNING"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    first = worker("first")
    app.conf.task_default_queue = queue
    app.conf.broker_url = broker
    slow.apply_async(queue=queue)
    while not starts(marks):
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.time()
    second = worker("second")
    try:
        while len(starts(marks)) < 2:
            if time.time() - killed > 400:
                print(f"{label}: not back 400s after the SIGKILL")
                return
            time.sleep(0.2)
        print(f"{label}: message back {time.time() - killed:.1f}s after the SIGKILL "
              f"(visibility_timeout {VISIBILITY_TIMEOUT_S}s)", flush=True)
    finally:
        second.send_signal(signal.SIGKILL)
        second.wait()
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
        os.unlink(marks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", default="redis://127.0.0.1:6379/5")
    a = ap.parse_args()
    measure(a.broker, "kombu defaults (unacked_restore_interval 10, unacked_restore_throttle 10)", {})
    measure(a.broker, "unacked_restore_interval 1, unacked_restore_throttle 1",
            {"unacked_restore_interval": 1, "unacked_restore_throttle": 1})


if __name__ == "__main__":
    main()
