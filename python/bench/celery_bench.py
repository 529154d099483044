"""Guarded Celery task rate next to the same task unguarded, in the same run,
on PostgreSQL; and the guard's per-call overhead in-process.

    .venv/python/bin/python python/bench/celery_bench.py \
        --broker amqp://guest:guest@127.0.0.1:5672// \
        --db postgresql://postgres@127.0.0.1:5432/test --tasks 2000 --calls 2000 --concurrency 2,4

Prints tasks/s for the task unguarded, guarded, and with the guard's own
statements run raw (several alternating rounds on the same worker), the
statements each sent per task, the time the guard adds per task and process
next to what its statements cost raw, and per-call latency percentiles."""
import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def per_call(db, calls, rounds=3):
    """guard.run with a no-op effect (claim + completion per call) against the
    same two statements run raw through psycopg, and the bare effect; rounds
    alternate so drift on a shared machine hits every variant. Returns
    {variant: (ops/s median, p50 ms, p99 ms, statements per call)}."""
    import psycopg

    import onceonly
    from onceonly.stores import params
    from onceonly.stores.postgres import PgStore, statement

    schema = "bench_" + secrets.token_hex(4)
    store = PgStore(db, schema=schema)
    store.migrate()
    sent = [0]
    store_run = store._run

    def counted(conn, name, args):
        sent[0] += 1
        return store_run(conn, name, args)

    store._run = counted
    guard = onceonly.Guard(store, onceonly.JobSpec.build("bench.call", effect="keyed"))
    payload = onceonly.Payload.of({"args": [1], "kwargs": {}})
    noop = lambda ctx: {"ok": True}
    conn = psycopg.connect(db, autocommit=True)
    claim_sql, move_sql = statement("claim", schema), statement("move", schema)
    variants = [
        ("effect alone (no guard)", lambda r, i: noop(None), 0),
        ("raw claim.sql + move.sql (psycopg, no guard logic)", lambda r, i: _raw(conn, claim_sql, move_sql, params, payload, f"{r}-{i}"), 2),
        ("guard.run (claim, effect, fenced completion)", lambda r, i: guard.run(f"k{r}-{i}", payload, noop), None),
        ("guard.run on a repeat (stored result)", lambda r, i: guard.run(f"k{r}-{i}", payload, noop), None),
    ]
    rates, lats, stmts = {}, {}, {}
    try:
        for r in range(rounds):
            for name, one, fixed in variants:
                lat = []
                sent[0] = 0
                t0 = time.perf_counter()
                for i in range(calls):
                    s = time.perf_counter()
                    one(r, i)
                    lat.append(time.perf_counter() - s)
                took = time.perf_counter() - t0
                rates.setdefault(name, []).append(calls / took)
                lats.setdefault(name, []).extend(lat)
                stmts[name] = fixed if fixed is not None else sent[0] / calls
    finally:
        conn.close()
        store.close()
        with psycopg.connect(db, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return {n: (statistics.median(rates[n]), pct(lats[n], 50) * 1e3, pct(lats[n], 99) * 1e3, stmts[n]) for n in rates}


def _raw(conn, claim_sql, move_sql, params, payload, key):
    from onceonly import State
    from onceonly.stores.params import OpMove

    with psycopg_raw(conn) as cur:
        cur.execute(claim_sql, params.claim(0, "bench.raw", f"k{key}", "bench", payload.fingerprint, payload.json, 30_000))
        token = cur.fetchone()[0]
        cur.execute(move_sql, params.move(0, OpMove("bench.raw", f"k{key}", token, State.CLAIMED, State.COMPLETED, result='{"ok":true}'), bool))
        assert cur.rowcount == 1


def psycopg_raw(conn):
    import psycopg

    return psycopg.RawCursor(conn)


KINDS = ("unguarded", "guarded", "raw")


def celery_rates(broker, db, tasks, rounds, concurrency):
    """Tasks/s per kind (rounds alternating on the same worker) and statements per task."""
    import psycopg

    run = secrets.token_hex(4)
    tmp = tempfile.mkdtemp(prefix="onceonly-bench-")
    done = os.path.join(tmp, "done.txt")
    env = dict(os.environ, BENCH_BROKER=broker, BENCH_DB=db, BENCH_QUEUE=f"onceonly-bench-{run}", BENCH_DONE=done,
               PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    os.environ.update({k: env[k] for k in ("BENCH_BROKER", "BENCH_DB", "BENCH_QUEUE", "BENCH_DONE")})
    sys.path.insert(0, HERE)
    import onceonly

    onceonly.connect(db).migrate()
    import bench_app

    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "bench_app", "worker", "-P", "prefork", "-c", str(concurrency), "-n", f"bench-{run}@%h",
                               "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"],
                              env=env, stdout=open(os.path.join(tmp, "worker.log"), "w"), stderr=subprocess.STDOUT)
    rates = {k: [] for k in KINDS}
    sent = {k: [] for k in KINDS}
    task_of = {"unguarded": bench_app.unguarded, "guarded": bench_app.guarded, "raw": bench_app.raw}
    try:
        # Warm up: workers started, connections open.
        for i in range(50):
            for kind in KINDS:
                task_of[kind].delay(f"warm-{run}-{kind}-{i}")
        seen = _Lines(done)
        seen.wait(50 * len(KINDS))
        for r in range(rounds):
            for kind in KINDS:
                before = seen.count()
                counts_before = dict(seen.last_count)
                t0 = time.perf_counter()
                for i in range(tasks):
                    task_of[kind].delay(f"{run}-{kind}-{r}-{i}")
                seen.wait(before + tasks)
                rates[kind].append(tasks / (time.perf_counter() - t0))
                sent[kind].append([sum(v[j] - counts_before.get(pid, (0, 0, 0, 0))[j] for pid, v in seen.last_count.items()) / tasks
                                   for j in range(4)])
    finally:
        worker.terminate()
        worker.wait(30)
        with bench_app.app.connection_for_write() as conn:
            conn.default_channel.queue_delete(env["BENCH_QUEUE"])
        with psycopg.connect(db, autocommit=True) as c:
            c.execute("DELETE FROM onceonly.ops WHERE job_type IN ('bench.guarded', 'bench.raw')")
    return rates, sent


class _Lines:
    """The done file as it grows: how many tasks ran, and each process's last statement count."""

    def __init__(self, path):
        self.path, self.offset, self.n, self.last_count = path, 0, 0, {}

    def count(self):
        if os.path.exists(self.path):
            with open(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
            whole = chunk[:chunk.rfind("\n") + 1]
            self.offset += len(whole)
            for line in whole.splitlines():
                _, pid, *totals = line.split()
                totals = (int(totals[0]), *map(float, totals[1:]))
                if totals[0] >= self.last_count.get(pid, (0,))[0]:
                    self.last_count[pid] = totals
                self.n += 1
        return self.n

    def wait(self, n, timeout=600):
        deadline = time.monotonic() + timeout
        while self.count() < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.n} of {n} tasks ran")
            time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    ap.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--tasks", type=int, default=2000, help="tasks per round and kind")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", default="2", help="prefork worker processes; a list (2,4) runs a worker for each",
                    type=lambda v: [int(x) for x in v.split(",")])
    ap.add_argument("--calls", type=int, default=2000, help="in-process calls per variant")
    a = ap.parse_args()
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared with other work)")
    if a.calls:
        print(f"\nper call, in-process, PostgreSQL {a.db.rsplit('@', 1)[-1]}, {a.calls} calls each:")
        print(f"  {'variant':<52}{'ops/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'stmts':>7}")
        calls = per_call(a.db, a.calls)
        for name, (ops, p50, p99, n) in calls.items():
            print(f"  {name:<52}{ops:>9.0f}{p50:>9.3f}{p99:>9.3f}{n:>7.2f}")
        guarded, raw = calls["guard.run (claim, effect, fenced completion)"][0], calls["raw claim.sql + move.sql (psycopg, no guard logic)"][0]
        print(f"  guard.run / raw: {guarded / raw:.2f}x (target >= 0.9)")
    if len(a.concurrency) > 1:
        # One process per worker: the Celery app is configured at import, once per process.
        for c in a.concurrency:
            subprocess.run([sys.executable, __file__, "--broker", a.broker, "--db", a.db, "--tasks", str(a.tasks),
                            "--rounds", str(a.rounds), "--calls", "0", "--concurrency", str(c)], check=True)
        return
    for c in a.concurrency:
        rates, sent = celery_rates(a.broker, a.db, a.tasks, a.rounds, c)
        print(f"\nCelery, {a.broker.split('@')[-1]}, prefork -c {c}, {a.tasks} tasks per round, {a.rounds} rounds alternating:")
        med = {k: statistics.median(v) for k, v in rates.items()}
        for name, values in rates.items():
            print(f"  {name:<10} {med[name]:>7.0f} tasks/s  {statistics.median(s[0] for s in sent[name]):>4.2f} statements/task"
                  f"  (rounds: {', '.join(f'{v:.0f}' for v in values)})")
        # Where a guarded task's time in guard.run goes (timers in the worker processes).
        g, st, b = (statistics.median(s[j] for s in sent["guarded"]) * 1e3 for j in (1, 2, 3))
        print(f"  in guard.run per task: {g:.2f} ms = statements {st:.2f} ms + body {b:.2f} ms + the guard's own code {g - st - b:.2f} ms")
        # Time per task and process over the unguarded task: what the guard adds, and what its statements cost raw.
        added = {k: c * (1 / med[k] - 1 / med["unguarded"]) * 1e3 for k in ("guarded", "raw")}
        print(f"  added per task and process: guarded {added['guarded']:.2f} ms, its statements raw {added['raw']:.2f} ms;"
              f" guarded/raw {added['guarded'] / added['raw']:.2f} (target <= 1.5)")
        print(f"  guarded/unguarded: {med['guarded'] / med['unguarded']:.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
