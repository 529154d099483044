"""Runs the scenarios of DESIGN.md section 5 through real Celery workers: the
harness publishes messages to the broker, workers consume them, the broker
redelivers what a killed worker held; the harness only counts what reached
the destination and what the records say, against what the policy allowed."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Callable, Dict, List, Optional

from celery import Celery

from .. import Guard, JobSpec, Payload, State, connect
from ..stores import OpMove
from ..testing.destination import Destination
from . import demo
from .allowed import allowed
from .workers import Workers

KINDS = ["local", "keyed", "lookup", "opaque/hold", "opaque/at-least-once", "opaque/at-most-once"]
SCENARIOS = ["repeat", "concurrent", "crash_after_claim", "crash_after_effect", "lease", "similar_data",
             "cancel_while_sending", "failure_after_success", "other_payload"]
NUMBER = {s: i + 1 for i, s in enumerate(SCENARIOS)}
TERMINAL = ("success", "failure")
DATA = {"amount": 19.99, "to": "user@example.com"}


def slug(kind: str) -> str:
    return kind.replace("/", "-")


class Run:
    """One replay: config, destinations, workers, and the entries measured."""

    def __init__(self, broker: str, db: Optional[str], runs: int, workers: int, lease: str, timeout: str,
                 visibility_timeout_s: float, log: Callable[[str], None], framework: Optional[str] = None):
        self.run_id = "replay-py-" + secrets.token_hex(4)
        self.dir = tempfile.mkdtemp(prefix=self.run_id + "-")
        os.makedirs(os.path.join(self.dir, "crash"))
        self.db = db or f"sqlite:///{self.dir}/replay.db"
        self.broker, self.runs, self.log, self.framework = broker, runs, log, framework
        self.lease, self.timeout = lease, timeout
        self.dest = {"keyed": Destination("keyed").start(), "plain": Destination("opaque").start()}
        self.queue = f"onceonly-{self.run_id}"
        self.config_path = os.path.join(self.dir, "config.json")
        with open(self.config_path, "w") as f:
            json.dump({"broker": broker, "db": self.db, "run_id": self.run_id, "dir": self.dir, "queue": self.queue,
                       "lease": lease, "timeout": timeout, "visibility_timeout_s": visibility_timeout_s,
                       "framework": framework, "destinations": {k: d.base_url for k, d in self.dest.items()}}, f)
        if framework == "django":
            # The project's own migrate makes onceonly's tables and the effect's rows' tables.
            django_migrate(self.config_path, self.dir)
        self.store = connect(self.db)
        self.store.migrate()
        if framework != "django":
            demo.create(self.db)
        self.publisher = Celery("onceonly-replay-harness", broker=broker)
        self.publisher.conf.broker_transport_options = {"visibility_timeout": visibility_timeout_s}
        self.workers = Workers(self.config_path, self.dir, self.queue, workers)
        self.spec = JobSpec.build("x", lease=lease, timeout=timeout)

    # -- plumbing ------------------------------------------------------------------
    def job(self, kind: str, naive: bool) -> str:
        return f"{self.run_id}.{'naive.' if naive else ''}{slug(kind)}"

    def destination(self, kind: str) -> Optional[Destination]:
        return None if kind == "local" else self.dest["keyed" if kind == "keyed" else "plain"]

    def publish(self, kind: str, naive: bool, key: str, data=DATA) -> None:
        name = f"replay.{'naive' if naive else 'guarded'}.{slug(kind)}"
        self.publisher.send_task(name, args=[key, data], queue=self.queue)

    def deliveries(self) -> List[Dict]:
        path = os.path.join(self.dir, "deliveries.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def wait_terminal(self, job: str, want: Counter, timeout: float = 90) -> List[Dict]:
        """Waits until each key had ``want[key]`` deliveries that ended (success or failure)."""
        deadline = time.monotonic() + timeout
        while True:
            got = Counter(d["key"] for d in self.deliveries() if d["job"] == job and d["outcome"] in TERMINAL)
            if all(got[k] >= n for k, n in want.items()):
                return [d for d in self.deliveries() if d["job"] == job and d["key"] in want]
            if time.monotonic() > deadline:
                missing = {k: (got[k], n) for k, n in want.items() if got[k] < n}
                raise TimeoutError(f"deliveries not finished after {timeout:.0f}s (key: got, want): {dict(list(missing.items())[:5])}")
            time.sleep(0.05)

    def effects(self, kind: str, naive: bool, keys: List[str], live: bool = False) -> Dict[str, int]:
        job = self.job(kind, naive)
        if kind == "local":
            found = demo.effects_by_key(self.db, job)
            return {k: found.get(k, 0) for k in keys}
        d = self.destination(kind)
        count = d.live if live else d.effects
        return {k: count(f"{job}:{k}") for k in keys}

    def crash_at(self, kind: str, naive: bool, key: str, point: str, death: str) -> None:
        with open(os.path.join(self.dir, "crash", f"{self.job(kind, naive)}__{key}"), "w") as f:
            f.write(f"{point} {death}")

    def payload(self, key: str, data=DATA) -> Payload:
        return Payload.of({"args": [key, data], "kwargs": {}})

    # -- one entry -----------------------------------------------------------------
    def entry(self, kind: str, scenario: str, variant: Optional[str], title: str) -> Dict:
        allow = allowed(kind, scenario)
        e = {"number": NUMBER[scenario], "scenario": scenario, "title": title, "kind": kind, "variant": variant,
             "runs": 1, "allowed": allow, "naive": None, "guarded": None, "records": None, "checks": [],
             "notes": [], "failures": [], "error": None, "skipped": None, "job_type": self.job(kind, False),
             "elapsed_ms": 0, "verdict": "not_applicable", "pass": True}
        if allow.get("not_applicable"):
            return e
        started = time.monotonic()
        try:
            self.workers.ensure()
            body = getattr(self, "s_" + scenario)
            naive, guarded, keys, checks = body(kind, variant)
            e["runs"] = len(guarded)
            e["naive"] = {"total": sum(naive.values()), "by_run": _by_run(naive)}
            e["guarded"] = {"total": sum(guarded.values()), "by_run": _by_run(guarded)}
            states = demo.record_states(self.store, self.job(kind, False), keys)
            e["records"] = {"count": sum(states.values()), "states": states}
            e["checks"] = [{"name": n, "passed": bool(ok), "detail": d} for n, ok, d in checks]
            e["failures"] += judge(allow, guarded, states, e["checks"])
        except Exception as ex:  # the entry fails, the run goes on
            e["error"] = f"{type(ex).__name__}: {ex}"
            e["failures"].append(e["error"])
        e["elapsed_ms"] = int((time.monotonic() - started) * 1000)
        e["pass"] = not e["failures"]
        e["verdict"] = "pass" if e["pass"] else "fail"
        return e

    def both(self, kind: str, act: Callable[[bool], None], keys: List[str], live: bool = False):
        """Runs ``act`` for the naive job, then the guarded one; their counts per key."""
        act(True)
        naive = self.effects(kind, True, keys, live)
        act(False)
        return naive, self.effects(kind, False, keys, live)

    # -- the scenarios ---------------------------------------------------------------
    def s_repeat(self, kind, variant):
        key, results = "repeat", {}

        def act(naive):
            for i in range(3):
                self.publish(kind, naive, key)
                done = self.wait_terminal(self.job(kind, naive), Counter({key: i + 1}))
            results[naive] = [d["detail"] for d in done if d["outcome"] in TERMINAL]

        naive, guarded = self.both(kind, act, [key])
        same = len(set(results[False])) == 1
        return naive, guarded, [key], [("the 2nd and 3rd deliveries got the stored result", same, " / ".join(results[False]))]

    def s_concurrent(self, kind, variant):
        keys = [f"c{i}" for i in range(self.runs)]
        errors = {}

        def act(naive):
            for k in keys:  # two copies of each, back to back: the two workers take one each
                self.publish(kind, naive, k)
                self.publish(kind, naive, k)
            done = self.wait_terminal(self.job(kind, naive), Counter({k: 2 for k in keys}), timeout=60 + self.runs)
            errors[naive] = [d for d in done if d["outcome"] == "failure"]

        naive, guarded = self.both(kind, act, keys)
        pids = {d["pid"] for d in self.deliveries() if d["job"] == self.job(kind, False)}
        return naive, guarded, keys, [
            ("no worker got an error", not errors[False], "none" if not errors[False] else str(errors[False][:3])),
            ("two or more worker processes consumed", len(pids) >= 2, f"{len(pids)} worker processes"),
        ]

    def _crash(self, kind, variant, point):
        key, death = f"crash-{point}-{variant.lower()}", "sigkill" if variant == "SIGKILL" else "fault"
        died = {}

        def act(naive):
            started_before, killed_before = self.workers.started, self.workers.sigkilled
            self.crash_at(kind, naive, key, point, death)
            self.publish(kind, naive, key)
            done = self.wait_terminal(self.job(kind, naive), Counter({key: 1}))
            died[naive] = [d for d in done if d["outcome"] == "died"]
            self.workers.ensure()
            died[(naive, "restarted")] = self.workers.started - started_before
            died[(naive, "sigkilled")] = self.workers.sigkilled - killed_before

        naive, guarded = self.both(kind, act, [key])
        checks = [(f"the worker died at {point}", len(died[False]) == 1, died[False][0]["detail"] if died[False] else "it did not die")]
        if death == "sigkill":
            checks.append(("the worker process ended by SIGKILL and was restarted; the broker redelivered",
                           died[(False, "sigkilled")] == 1 and died[(False, "restarted")] == 1,
                           f"{died[(False, 'sigkilled')]} ended by SIGKILL, {died[(False, 'restarted')]} restarted"))
        last = [d for d in self.deliveries() if d["job"] == self.job(kind, False) and d["key"] == key and d["outcome"] in TERMINAL]
        checks.append(("the redelivery after the lease ended the operation", bool(last), last[-1]["detail"] if last else "-"))
        return naive, guarded, [key], checks

    def s_crash_after_claim(self, kind, variant):
        return self._crash(kind, variant, "after_claim")

    def s_crash_after_effect(self, kind, variant):
        return self._crash(kind, variant, "after_effect")

    def s_lease(self, kind, variant):
        key = "lease"
        payload = self.payload(key)
        lease_ms = self.spec.lease_ms

        def act(naive):
            job = self.job(kind, naive)
            if naive:  # a slow worker is still acting: the naive job does not know
                if kind == "local":
                    conn = demo.connect(self.db)
                    demo.insert_effect(conn, job, key, 0)
                    conn.commit()
                    conn.close()
                else:
                    from ..effect import EffectCtx
                    from ..http import HttpDestination

                    HttpDestination(self.destination(kind).base_url).send(EffectCtx(job, key, f"{job}:{key}", 0, 0, DATA, deadline=time.monotonic() + 5))
            elif kind == "local":
                # A slow worker's local claim lives in its open transaction: the
                # delivery waits on it; then the slow worker dies (rolls back).
                holder = threading.Thread(target=self._hold_local, args=(job, key, payload, lease_ms / 1000))
                holder.start()
                time.sleep(0.2)
                self.publish(kind, naive, key)
                holder.join()
                self.wait_terminal(job, Counter({key: 1}))
                return
            else:
                claim = self.store.claim(job, key, "replay-slow-worker:0:00000000", payload, lease_ms)
                assert not hasattr(claim, "record"), "the planted claim was not taken"
            self.publish(kind, naive, key)
            self.wait_terminal(job, Counter({key: 1}))

        naive, guarded = self.both(kind, act, [key])
        seen = [d["outcome"] for d in self.deliveries() if d["job"] == self.job(kind, False) and d["key"] == key]
        if kind == "local":
            check = ("the delivery waited for the live claim's transaction", seen[-1:] == ["success"], " / ".join(seen))
        else:
            check = ("the young claim was left alone (retried with a countdown)", seen[:1] == ["retry"], " / ".join(seen))
        return naive, guarded, [key], [check]

    def _hold_local(self, job, key, payload, seconds):
        g = Guard(self.store, JobSpec.build(job, effect="local", lease=self.lease, timeout=self.timeout))
        conn = demo.connect(self.db)

        def slow(c, ctx):
            demo.insert_effect(c, job, key, 0)
            time.sleep(seconds)
            raise RuntimeError("the slow worker died")

        try:
            g.run_local(conn, key, payload, slow)
        except Exception:
            pass
        finally:
            conn.close()

    def s_similar_data(self, kind, variant):
        keys = ["order-1001", "order-1002"]

        def act(naive):
            for k in keys:
                self.publish(kind, naive, k)
            self.wait_terminal(self.job(kind, naive), Counter({k: 1 for k in keys}))

        naive, guarded = self.both(kind, act, keys)
        # One run is the pair: its count is both operations' effects.
        return {"pair": sum(naive.values())}, {"pair": sum(guarded.values())}, keys, []

    def s_cancel_while_sending(self, kind, variant):
        key, dest, outcome = "cancel", self.destination(kind), {}

        def act(naive):
            job = self.job(kind, naive)
            dest.delay_after_create = 0.4  # the response waits; the item exists (within the 1s timeout)
            try:
                self.publish(kind, naive, key)
                deadline = time.monotonic() + 30
                while dest.effects(f"{job}:{key}") == 0 and time.monotonic() < deadline:
                    time.sleep(0.02)
                if not naive:
                    rec = self.store.get(job, key).record
                    outcome["requested"] = self.store.request_cancel(job, key, rec.token)
                done = self.wait_terminal(job, Counter({key: 1}))
                outcome[naive] = done[-1]["detail"]
            finally:
                dest.delay_after_create = 0

        naive, guarded = self.both(kind, act, [key], live=True)
        rec = self.store.get(self.job(kind, False), key).record
        said = rec.error or ""
        return naive, guarded, [key], [
            ("the cancel was requested while the claim was live", outcome.get("requested") is True, str(outcome.get("requested"))),
            ("the record says where the item stands", rec.state is State.CANCELLED or "withdraw failed" in said, f"{rec.state}: {said}"),
        ]

    def s_failure_after_success(self, kind, variant):
        key, moved = "late-failure", {}

        def act(naive):
            job = self.job(kind, naive)
            self.publish(kind, naive, key)
            self.wait_terminal(job, Counter({key: 1}))
            if naive:
                demo.naive_unmark(self.db, job, key)
            else:
                rec = self.store.get(job, key).record
                moved["late"] = self.store.move(OpMove(job, key, rec.token, State.CLAIMED, State.FAILED, error="late failure"))
            self.publish(kind, naive, key)  # and the message comes back
            self.wait_terminal(job, Counter({key: 2}))

        naive, guarded = self.both(kind, act, [key])
        return naive, guarded, [key], [("the late failure write changed 0 rows", moved.get("late") is False, str(moved.get("late")))]

    def s_other_payload(self, kind, variant):
        key, seen = "reused-key", {}

        def act(naive):
            job = self.job(kind, naive)
            self.publish(kind, naive, key)
            self.wait_terminal(job, Counter({key: 1}))
            self.publish(kind, naive, key, {"amount": 25.0, "to": "other@example.com"})
            done = self.wait_terminal(job, Counter({key: 2}))
            seen[naive] = [d["detail"] for d in done if d["outcome"] in TERMINAL]

        naive, guarded = self.both(kind, act, [key])
        rec = self.store.get(self.job(kind, False), key).record
        refused = seen[False][-1] == "PayloadMismatch"
        return naive, guarded, [key], [
            ("the second payload was refused (PayloadMismatch, not retried)", refused, " / ".join(seen[False])),
            ("the record keeps the first payload", rec.fingerprint == self.payload(key).fingerprint, rec.fingerprint[:12]),
        ]

    def close(self) -> None:
        self.workers.stop()
        for d in self.dest.values():
            d.stop()
        try:
            with self.publisher.connection_for_write() as conn:
                conn.default_channel.queue_delete(self.queue)
        except Exception:
            pass


def django_migrate(config_path: str, run_dir: str) -> None:
    """``manage.py migrate`` of the replay's Django project, in its own process as a deploy runs it."""
    env = dict(os.environ, ONCEONLY_REPLAY_CONFIG=config_path,
               DJANGO_SETTINGS_MODULE="onceonly.replay.django_project.settings")
    done = subprocess.run([sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        with open(os.path.join(run_dir, "migrate.log"), "w") as f:
            f.write(done.stdout)
        raise RuntimeError(f"the Django project's migrate exited with {done.returncode}: {done.stdout.strip()[-2000:]}")


def judge(allow: Dict, guarded: Dict[str, int], states: Dict[str, int], checks: List[Dict]) -> List[str]:
    """Every way a guarded run broke what was allowed before it ran (empty: pass)."""
    failures = [f"{key}: {n} counted, allowed {allow['min']}-{allow['max']}"
                for key, n in guarded.items() if not allow["min"] <= n <= allow["max"]]
    failures += [f"a record ended {state}; allowed {', '.join(allow['states'])}" for state in states if state not in allow["states"]]
    failures += [f"check failed: {c['name']} ({c['detail']})" for c in checks if not c["passed"]]
    return failures


def _by_run(counts: Dict[str, int]) -> Dict[str, int]:
    hist = Counter(str(n) for n in counts.values())
    return dict(sorted(hist.items(), key=lambda kv: int(kv[0])))


TITLES = {
    ("repeat", None): "same message 3 times",
    ("concurrent", "2 workers"): "2 workers at once",
    ("crash_after_claim", "fault"): "dies after claim (fault)",
    ("crash_after_claim", "SIGKILL"): "dies after claim (SIGKILL)",
    ("crash_after_effect", "fault"): "dies after effect (fault)",
    ("crash_after_effect", "SIGKILL"): "dies after effect (SIGKILL)",
    ("lease", None): "young claim kept, old by policy",
    ("similar_data", None): "2 ops, similar data",
    ("cancel_while_sending", None): "cancel while sending",
    ("failure_after_success", None): "failure after success",
    ("other_payload", None): "same key, other payload",
}
