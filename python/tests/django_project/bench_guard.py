"""What the guard costs on a Django ORM write: N writes each in its own
transaction.atomic() (the baseline), then N guarded ones (claim, the same
write, completion in one atomic block), interleaved in rounds so both see the
same machine; on a fresh PostgreSQL database and a fresh SQLite file.

    python tests/django_project/bench_guard.py [--n 500] [--rounds 5] [--pg postgresql://postgres@127.0.0.1:5432]
"""
import argparse
import os
import secrets
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432")
    a = ap.parse_args()
    from testsupport import setup

    setup(a.pg + "/postgres", a.pg)
    from django.db import transaction

    from onceonly.django import guard
    from shipping.models import Shipment

    run = secrets.token_hex(3)
    for alias, name in (("default", "PostgreSQL"), ("lite", "SQLite")):
        @guard(job="bench", key="order_id", using=alias)
        def guarded(ctx, order_id):
            Shipment.objects.using(alias).create(order_id=order_id)

        def plain(order_id):
            with transaction.atomic(using=alias):
                Shipment.objects.using(alias).create(order_id=order_id)

        raw, guard_rates = [], []
        for r in range(a.rounds):
            for label, fn, rates in (("raw", plain, raw), ("guarded", guarded, guard_rates)):
                started = time.perf_counter()
                for i in range(a.n):
                    fn(order_id=f"{run}-{label}-{r}-{i}") if label == "guarded" else fn(f"{run}-{label}-{r}-{i}")
                rates.append(a.n / (time.perf_counter() - started))
        rm, gm = statistics.median(raw), statistics.median(guard_rates)
        print(f"{name}: ORM write in atomic {rm:.0f}/s, guarded {gm:.0f}/s, guarded/raw {gm / rm:.2f}x "
              f"(median of {a.rounds} rounds of {a.n}, interleaved)")


if __name__ == "__main__":
    main()
