"""A small shop's Celery tasks, each guarded by onceonly.

- send_receipt: a mail API that dedups on an idempotency key (keyed).
- record_shipment: a row in the shop's own database, written in the same
  transaction as the claim and the completion, through a SQLAlchemy session (local).
- charge_card: a payment API with neither a key nor a lookup (opaque): a
  crash in the middle is held for a person instead of charging twice.
"""
import os

from celery import Celery
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

import onceonly
from onceonly.celery import guarded_task
from onceonly.http import HttpDestination

BROKER = os.environ.get("BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
DB = os.environ.get("ONCEONLY_DB", "sqlite:///" + os.path.abspath("shop.db"))
MAIL = HttpDestination(os.environ.get("MAIL_API", "http://127.0.0.1:8025"))
PAYMENTS = HttpDestination(os.environ.get("PAYMENTS_API", "http://127.0.0.1:8026"))

app = Celery("shop", broker=BROKER, backend="rpc://")
app.conf.update(task_default_queue=os.environ.get("SHOP_QUEUE", "shop"), worker_prefetch_multiplier=1)


def sqlalchemy_url(db: str) -> str:
    if db.startswith("sqlite:///"):
        return "sqlite:///" + db[len("sqlite://"):]  # onceonly's sqlite:///ABS is SQLAlchemy's sqlite:////ABS
    return db.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://", 1)


engine = create_engine(sqlalchemy_url(DB))


@guarded_task(app, db=DB, job="send_receipt", key="order_id", effect="keyed", lease="30s", timeout="10s")
def send_receipt(ctx, order_id, email):
    """POST to the mail API with Idempotency-Key: send_receipt:<order_id>."""
    return MAIL.send(ctx)


@guarded_task(app, db=DB, job="record_shipment", key="order_id", effect="local",
              connection=lambda: Session(engine))
def record_shipment(ctx, order_id, carrier):
    """The row and the completed record commit together, or neither does."""
    ctx.conn.execute(text("INSERT INTO shipments (order_id, carrier) VALUES (:o, :c)"), {"o": order_id, "c": carrier})
    return {"order_id": order_id, "carrier": carrier}


@guarded_task(app, db=DB, job="charge_card", key="order_id", effect="opaque", on_stale="hold",
              lease="60s", timeout="20s")
def charge_card(ctx, order_id, cents):
    return PAYMENTS.send(ctx)


def create_tables() -> None:
    onceonly.connect(DB).migrate()
    with engine.begin() as c:
        c.execute(text("CREATE TABLE IF NOT EXISTS shipments (order_id TEXT NOT NULL, carrier TEXT NOT NULL)"))
