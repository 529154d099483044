"""The Celery app the replay's worker processes run (``celery -A
onceonly.replay.worker_app worker``), configured from the run's config file
(env ONCEONLY_REPLAY_CONFIG). One guarded and one naive task per effect kind.
With ``framework: django`` in the config, the app is the Django project's
(django_project): settings from Django's, the guarded tasks
onceonly.django.celery's, the local effect's rows written through the ORM.

Crash points: the harness drops a marker file naming a key, a point and a
death; the first worker to reach that point for that key takes the marker
(an atomic rename) and dies there: SIGKILL of its own process, or an
injected fault (the message is rejected back to the broker)."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

from celery import Celery, signals
from celery.exceptions import Reject

from ..http import HttpDestination
from . import demo, kinds
from .kinds import KINDS, slug, transport_options

CONFIG = json.load(open(os.environ["ONCEONLY_REPLAY_CONFIG"]))
DJANGO = CONFIG.get("framework") == "django"
EFFECT_PAUSE_S = 0.02  # inside the effect, so two deliveries at once overlap

if DJANGO:
    import django

    os.environ["DJANGO_SETTINGS_MODULE"] = "onceonly.replay.django_project.settings"
    django.setup()
    from django.db import connection as django_connection

    from ..django.celery import guarded_task
    from .django_project.celery import app
    from .django_project.models import Effect, NaiveMark
else:
    from ..celery import guarded_task

    app = Celery("onceonly-replay", broker=CONFIG["broker"])
    app.conf.update(
        task_default_queue=CONFIG["queue"],
        worker_prefetch_multiplier=1,
        task_acks_late=True,
        broker_transport_options=transport_options(CONFIG["visibility_timeout_s"]),
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
_current = threading.local()


def job_of(kind: str, naive: bool = False) -> str:
    return kinds.job_of(CONFIG["run_id"], kind, naive)


def crash_marker(job: str, key: str) -> str:
    return os.path.join(CONFIG["dir"], "crash", f"{job}__{key}")


def maybe_die(job: str, key: str, point: str) -> bool:
    """Dies at ``point`` if the harness asked for it (once). True: inject a fault."""
    marker = crash_marker(job, key)
    try:
        with open(marker) as f:
            want_point, death = f.read().split()
    except FileNotFoundError:
        return False
    if want_point != point:
        return False
    try:
        os.rename(marker, marker + ".taken")  # only one process wins
    except FileNotFoundError:
        return False
    log_delivery(job, key, "died", f"{death} at {point}")
    if death == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def log_delivery(job: str, key: str, outcome: str, detail: str = "") -> None:
    line = json.dumps({"job": job, "key": key, "outcome": outcome, "detail": detail, "pid": os.getpid(), "at": time.time()})
    fd = os.open(os.path.join(CONFIG["dir"], "deliveries.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _remember_key(op_key, data):
    _current.key = op_key
    return op_key


def _fault_hook_for(job: str):
    def hook(point: str):
        return "crash" if maybe_die(job, _current.key, point) else None
    return hook


class RawRows:
    """The naive task's reads and writes on its own connection (demo.py's SQL), each committed."""

    def __init__(self):
        self.conn = demo.connect(CONFIG["db"])

    def done(self, job: str, key: str) -> bool:
        found = demo.naive_done(self.conn, job, key)
        self.conn.commit()
        return found

    def effect(self, job: str, key: str) -> None:
        demo.insert_effect(self.conn, job, key, os.getpid())
        self.conn.commit()

    def mark(self, job: str, key: str) -> None:
        demo.naive_mark(self.conn, job, key)
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()


class OrmRows:
    """The same through the Django ORM, in autocommit as a Django task without onceonly writes."""

    def done(self, job: str, key: str) -> bool:
        return NaiveMark.objects.filter(job=job, op_key=key).exists()

    def effect(self, job: str, key: str) -> None:
        Effect.objects.create(job=job, op_key=key, pid=os.getpid())

    def mark(self, job: str, key: str) -> None:
        NaiveMark.objects.create(job=job, op_key=key)

    def close(self) -> None:
        pass


def _make(kind: str):
    effect, on_stale, dest_name = KINDS[kind]
    job = job_of(kind)
    dest = HttpDestination(CONFIG["destinations"][dest_name]) if dest_name else None
    common = dict(job=job, key=_remember_key, effect=effect, fault_hook=_fault_hook_for(job),
                  # Redis hands a retry waiting for its countdown out again past the visibility timeout.
                  max_retry_delay=min(60.0, CONFIG["visibility_timeout_s"] / 2),
                  name=f"replay.guarded.{slug(kind)}")
    if not DJANGO:  # in the Django project: the store is Django's database, the rest ONCEONLY['JOBS'][job]
        common.update(db=CONFIG["db"], on_stale=on_stale, lease=CONFIG["lease"], timeout=CONFIG["timeout"])
    if effect == "local" and DJANGO:
        @guarded_task(app, **common)  # on Django's connection, in transaction.atomic()
        def guarded(ctx, op_key, data):
            time.sleep(EFFECT_PAUSE_S)
            if not django_connection.in_atomic_block:
                raise RuntimeError("the local effect ran outside transaction.atomic()")
            Effect.objects.using(ctx.conn.alias).create(job=job, op_key=op_key, pid=os.getpid())
            return {"key": op_key}
    elif effect == "local":
        @guarded_task(app, connection=lambda: demo.connect(CONFIG["db"]), **common)
        def guarded(ctx, op_key, data):
            time.sleep(EFFECT_PAUSE_S)
            demo.insert_effect(ctx.conn, job, op_key, os.getpid())
            return {"key": op_key}
    else:
        @guarded_task(app, lookup=dest.lookup, withdraw=dest.delete, **common)
        def guarded(ctx, op_key, data):
            time.sleep(EFFECT_PAUSE_S)
            return dest.send(ctx)

    naive_job = job_of(kind, naive=True)

    @app.task(name=f"replay.naive.{slug(kind)}", acks_late=True, reject_on_worker_lost=True)
    def naive(op_key, data):
        """Read state, then act: what a job does without onceonly."""
        rows = OrmRows() if DJANGO else RawRows()
        try:
            if rows.done(naive_job, op_key):
                return "already done"
            if maybe_die(naive_job, op_key, "after_claim"):
                raise Reject("injected crash", requeue=True)
            time.sleep(EFFECT_PAUSE_S)
            if dest is None:
                rows.effect(naive_job, op_key)
            else:
                from ..effect import EffectCtx

                dest.send(EffectCtx(naive_job, op_key, f"{naive_job}:{op_key}", 0, 0, data, deadline=time.monotonic() + 5))
            if maybe_die(naive_job, op_key, "after_effect"):
                raise Reject("injected crash", requeue=True)
            rows.mark(naive_job, op_key)
            return "done"
        finally:
            rows.close()

    return guarded, naive


TASKS = {kind: _make(kind) for kind in KINDS}


@signals.task_postrun.connect
def _log_outcome(task=None, args=None, state=None, retval=None, **_):
    if not task or not task.name.startswith("replay.") or not args:
        return
    naive = task.name.startswith("replay.naive.")
    kind = next(k for k in KINDS if task.name.endswith("." + slug(k)))
    detail = type(retval).__name__ if isinstance(retval, BaseException) else json.dumps(retval, default=str)[:200]
    log_delivery(job_of(kind, naive), args[0], (state or "").lower(), detail)


@signals.worker_ready.connect
def _ready(**_):
    open(os.path.join(CONFIG["dir"], f"ready-{os.getpid()}"), "w").close()
