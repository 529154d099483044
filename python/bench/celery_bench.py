"""Guarded Celery task rate next to the same task unguarded, in the same run,
on PostgreSQL; and the guard's per-call overhead in-process.

    .venv/python/bin/python python/bench/celery_bench.py \
        --broker amqp://guest:guest@127.0.0.1:5672// \
        --db postgresql://postgres@127.0.0.1:5432/test --tasks 2000 --calls 2000

Prints tasks/s for each (several alternating rounds; baseline measured in
the same run) and per-call latency percentiles."""
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


def per_call(db, calls):
    """guard.run with a no-op effect (claim + completion per call) against the
    same two statements run raw through psycopg, and the bare effect."""
    import psycopg

    import onceonly
    from onceonly.stores import params
    from onceonly.stores.postgres import PgStore, statement

    schema = "bench_" + secrets.token_hex(4)
    store = PgStore(db, schema=schema)
    store.migrate()
    guard = onceonly.Guard(store, onceonly.JobSpec.build("bench.call", effect="keyed"))
    payload = onceonly.Payload.of({"args": [1], "kwargs": {}})
    noop = lambda ctx: {"ok": True}
    conn = psycopg.connect(db, autocommit=True)
    claim_sql, move_sql = statement("claim", schema), statement("move", schema)
    results = {}
    try:
        for name, one in [
            ("effect alone (no guard)", lambda i: noop(None)),
            ("raw claim.sql + move.sql (psycopg, no guard logic)", lambda i: _raw(conn, claim_sql, move_sql, params, payload, i)),
            ("guard.run (claim, effect, fenced completion)", lambda i: guard.run(f"k{i}", payload, noop)),
            ("guard.run on a repeat (stored result)", lambda i: guard.run(f"k{i}", payload, noop)),
        ]:
            lat = []
            t0 = time.perf_counter()
            for i in range(calls):
                s = time.perf_counter()
                one(i)
                lat.append(time.perf_counter() - s)
            took = time.perf_counter() - t0
            results[name] = (calls / took, pct(lat, 50) * 1e3, pct(lat, 99) * 1e3)
    finally:
        conn.close()
        store.close()
        with psycopg.connect(db, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return results


def _raw(conn, claim_sql, move_sql, params, payload, i):
    from onceonly import State
    from onceonly.stores.params import OpMove

    with psycopg_raw(conn) as cur:
        cur.execute(claim_sql, params.claim(0, "bench.raw", f"k{i}", "bench", payload.fingerprint, payload.json, 30_000))
        token = cur.fetchone()[0]
        cur.execute(move_sql, params.move(0, OpMove("bench.raw", f"k{i}", token, State.CLAIMED, State.COMPLETED, result='{"ok":true}'), bool))
        assert cur.rowcount == 1


def psycopg_raw(conn):
    import psycopg

    return psycopg.RawCursor(conn)


def celery_rates(broker, db, tasks, rounds, concurrency):
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
    rates = {"unguarded": [], "guarded": []}
    try:
        lines = lambda: sum(1 for _ in open(done)) if os.path.exists(done) else 0
        # Warm up: workers started, connections open.
        for i in range(50):
            bench_app.unguarded.delay(f"warm-{i}")
            bench_app.guarded.delay(f"warm-{run}-{i}")
        _wait(lines, 100)
        for r in range(rounds):
            for name, task in (("unguarded", bench_app.unguarded), ("guarded", bench_app.guarded)):
                before = lines()
                t0 = time.perf_counter()
                for i in range(tasks):
                    task.delay(f"{run}-{r}-{i}")
                _wait(lines, before + tasks)
                rates[name].append(tasks / (time.perf_counter() - t0))
    finally:
        worker.terminate()
        worker.wait(30)
        with bench_app.app.connection_for_write() as conn:
            conn.default_channel.queue_delete(env["BENCH_QUEUE"])
        with psycopg.connect(db, autocommit=True) as c:
            c.execute("DELETE FROM onceonly.ops WHERE job_type = 'bench.guarded'")
    return rates


def _wait(lines, n, timeout=600):
    deadline = time.monotonic() + timeout
    while lines() < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {lines()} of {n} tasks ran")
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    ap.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--tasks", type=int, default=2000, help="tasks per round and kind")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2, help="prefork worker processes")
    ap.add_argument("--calls", type=int, default=2000, help="in-process calls per variant")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (shared with other work)")
    print(f"\nper call, in-process, PostgreSQL {a.db.rsplit('@', 1)[-1]}, {a.calls} calls each:")
    print(f"  {'variant':<52}{'ops/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for name, (ops, p50, p99) in per_call(a.db, a.calls).items():
        print(f"  {name:<52}{ops:>9.0f}{p50:>9.3f}{p99:>9.3f}")
    rates = celery_rates(a.broker, a.db, a.tasks, a.rounds, a.concurrency)
    print(f"\nCelery, {a.broker.split('@')[-1]}, prefork -c {a.concurrency}, {a.tasks} tasks per round, {a.rounds} rounds alternating:")
    for name, values in rates.items():
        print(f"  {name:<12} {statistics.median(values):>8.0f} tasks/s (median; rounds: {', '.join(f'{v:.0f}' for v in values)})")
    ratio = statistics.median(rates["guarded"]) / statistics.median(rates["unguarded"])
    print(f"  guarded/unguarded: {ratio:.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
