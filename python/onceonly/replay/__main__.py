"""python3 -m onceonly.replay --queue celery [--framework django] --broker URL [--db URL] [--runs N] [--json FILE]

Runs DESIGN.md section 5's scenarios through real Celery worker processes on
the given broker, naive and guarded side by side, and exits non-zero when a
guarded count breaks what its policy allowed (written before the run). With
--framework django the workers run inside a Django project (onceonly.django,
its settings, the local effect written through the ORM)."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from .harness import KINDS, SCENARIOS, TITLES, Run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m onceonly.replay", description=__doc__.split("\n\n")[1])
    ap.add_argument("--queue", required=True, choices=["celery"], help="the queue system (celery)")
    ap.add_argument("--framework", choices=["django"], help="run the workers inside a Django project (onceonly.django)")
    ap.add_argument("--broker", required=True, help="amqp://guest:guest@127.0.0.1:5672// or redis://127.0.0.1:6379/N")
    ap.add_argument("--db", help="sqlite:///ABS/PATH, postgresql://... or mysql://... (default: a fresh SQLite file)")
    ap.add_argument("--runs", type=int, default=100, help="runs of the concurrency scenario (default 100)")
    ap.add_argument("--json", help="write the report here, in the shape of `onceonly replay --json`")
    ap.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset of: " + ", ".join(SCENARIOS))
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of: " + ", ".join(KINDS))
    ap.add_argument("--lease", default="2s")
    ap.add_argument("--timeout", default="1s")
    ap.add_argument("--visibility-timeout", type=float, default=10.0, help="Redis transport's visibility_timeout, s")
    a = ap.parse_args(argv)
    scenarios = [s for s in a.scenarios.split(",") if s]
    kinds = [k for k in a.kinds.split(",") if k]
    bad = [s for s in scenarios if s not in SCENARIOS] + [k for k in kinds if k not in KINDS]
    if bad or a.runs < 1 or a.workers < 2:
        ap.error(f"unknown scenarios or kinds {bad}, or --runs < 1, or --workers < 2")

    # SIGTERM (a CI timeout, a person) ends the run through its cleanup: workers stopped, queue deleted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    say = lambda text: print(text, flush=True)
    started = time.monotonic()
    run = Run(a.broker, a.db, a.runs, a.workers, a.lease, a.timeout, a.visibility_timeout, say, a.framework)
    plan = [(k, s, v) for k in kinds for (s, v) in TITLES if s in scenarios]
    entries = []
    try:
        for i, (kind, scenario, variant) in enumerate(plan, 1):
            say(f"[{i:3}/{len(plan)}] {kind} · {SCENARIOS.index(scenario) + 1} {TITLES[(scenario, variant)]}")
            entries.append(run.entry(kind, scenario, variant, TITLES[(scenario, variant)]))
    finally:
        run.close()
    say("")
    say(table(entries))
    summary = {"pass": sum(e["verdict"] == "pass" for e in entries), "fail": sum(e["verdict"] == "fail" for e in entries),
               "not_applicable": sum(e["verdict"] == "not_applicable" for e in entries), "skipped": 0, "planned": 0}
    ok = summary["fail"] == 0
    report = {"db": run.db, "broker": a.broker, "queue": "celery", "framework": a.framework,
              "sigkills": run.workers.sigkilled, "elapsed_ms": int((time.monotonic() - started) * 1000),
              "entries": entries, "pass": ok, "run_id": run.run_id, "runs": a.runs, "workers": a.workers, "summary": summary}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    for e in entries:
        for failure in e["failures"]:
            say(f"FAIL {e['number']} {e['title']} [{e['kind']}]: {failure}")
    say(("PASS: every guarded count within what its policy allows" if ok else "FAIL: a guarded count broke its policy")
        + f" ({summary['pass']} pass, {summary['fail']} fail, {summary['not_applicable']} n/a); "
        f"celery{' in a Django project' if a.framework else ''} on {a.broker}, {run.db}, {a.workers} worker processes, "
        f"{report['sigkills']} killed by SIGKILL and restarted, {report['elapsed_ms'] / 1000:.1f}s, run {run.run_id}")
    return 0 if ok else 1


def table(entries) -> str:
    lines = [f"{'#':<3}{'scenario':<34}{'kind':<24}{'allowed':>9}{'naive':>7}{'guarded':>9}  {'records':<16}verdict"]
    last = None
    for e in entries:
        a = e["allowed"]
        rng = "n/a" if a.get("not_applicable") else (str(a["min"]) if a["min"] == a["max"] else f"{a['min']}-{a['max']}")
        if a.get("counted") == "live" and rng != "n/a":
            rng += " live"
        head = f"{e['number']:<3}{e['title']:<34}" if (e["number"], e["title"]) != last else " " * 37
        last = (e["number"], e["title"])
        naive = e["naive"]["total"] if e["naive"] else "-"
        guarded = e["guarded"]["total"] if e["guarded"] else "-"
        recs = " ".join(f"{n} {s}" for s, n in (e["records"] or {}).get("states", {}).items()) if e["records"] else ""
        lines.append(f"{head}{e['kind']:<24}{rng:>9}{naive:>7}{guarded:>9}  {recs:<16}{e['verdict']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
