"""Runs the shop end to end: a mail and a payment API (local test servers),
two Celery worker processes, and every task delivered three times, as a
queue may. Prints what reached each destination: once per order.

    cd python/examples/shop
    ../../../.venv/python/bin/python demo.py [--broker URL] [--db URL]
"""
import argparse
import os
import secrets
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    ap.add_argument("--db", default="sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="shop-"), "shop.db"))
    a = ap.parse_args()

    from onceonly.testing.destination import Destination

    mail, payments = Destination("keyed").start(), Destination("opaque").start()
    os.environ.update(BROKER_URL=a.broker, ONCEONLY_DB=a.db, MAIL_API=mail.base_url, PAYMENTS_API=payments.base_url,
                      SHOP_QUEUE="shop-" + secrets.token_hex(3))
    sys.path.insert(0, HERE)
    import tasks

    tasks.create_tables()
    workers = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "tasks", "worker", "-P", "solo", "-n", f"shop{i}-{secrets.token_hex(3)}@%h",
                                 "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"],
                                cwd=HERE, env=dict(os.environ, PYTHONPATH=HERE)) for i in range(2)]
    try:
        orders = ["order-1001", "order-1002"]
        results = []
        for order in orders:
            for _ in range(3):  # the queue delivers each message three times
                results.append(tasks.send_receipt.delay(order, f"{order}@example.com"))
                results.append(tasks.record_shipment.delay(order, "DHL"))
                results.append(tasks.charge_card.delay(order, 1999))
        for r in results:
            r.get(timeout=150)  # a duplicate of a running task retries after the job timeout
        from sqlalchemy import text

        with tasks.engine.connect() as c:
            shipments = c.execute(text("SELECT order_id, count(*) FROM shipments GROUP BY order_id ORDER BY order_id")).fetchall()
        print(f"{len(results)} deliveries ({len(orders)} orders x 3 tasks x 3 deliveries) on {a.broker} and {a.db}")
        for order in orders:
            print(f"  {order}: receipts sent {mail.effects('send_receipt:' + order)}, "
                  f"cards charged {payments.effects('charge_card:' + order)}, "
                  f"shipment rows {dict(shipments).get(order, 0)}")
        once = all(mail.effects("send_receipt:" + o) == 1 and payments.effects("charge_card:" + o) == 1
                   and dict(shipments).get(o) == 1 for o in orders)
        print("every effect happened once" if once else "SOMETHING HAPPENED MORE THAN ONCE")
        print(f"inspect the records: onceonly --db {a.db} inspect")
        return 0 if once else 1
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(20)
        mail.stop(), payments.stop()


if __name__ == "__main__":
    sys.exit(main())
