"""What every store does with the statements: run one, check what it changed,
decode the row. The decisions (who acts, which policy) are the guard's."""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..canonical import Payload
from ..errors import DatabaseError, Unreachable
from ..record import AuditEvent, Claim, Record, Snapshot, State
from . import params
from .params import OpMove

Rows = List[Dict[str, Any]]


class Store:
    """An operation-record store on one database. Subclasses supply the
    statements' dialect, the store's own connections and migrations.

    ``clock_offset_ms`` is added to the database's clock by every statement
    (parameter 1): tests move it to expire leases without sleeping; every
    process sharing a database in production leaves it at 0.
    """

    dialect = ""
    #: the page size that means "every row" in the operator statements
    all_rows: Any = None

    def __init__(self, url: str):
        self.url = url
        self.clock_offset_ms = 0
        self._local = threading.local()

    # -- supplied by each dialect -------------------------------------------------
    def _open(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _run(self, conn, name: str, args: Sequence) -> Tuple[int, Rows]:  # pragma: no cover
        """Runs statement ``name`` on ``conn``: (affected rows, returned rows)."""
        raise NotImplementedError

    def _flag(self, value: bool):  # pragma: no cover
        raise NotImplementedError

    def migrate(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def driver_connection(self, conn):  # pragma: no cover
        """The user's connection (driver or SQLAlchemy) as this store's driver connection."""
        raise NotImplementedError

    # -- the store's own connection, one per thread and process -------------------
    def _conn(self):
        local = self._local
        if getattr(local, "pid", None) != os.getpid() or local.conn is None:
            local.conn, local.pid = None, os.getpid()  # a forked child never reuses its parent's
            local.conn = self._open()
        return local.conn

    def _own(self, name: str, args: Sequence) -> Tuple[int, Rows]:
        try:
            return self._run(self._conn(), name, args)
        except (DatabaseError, Unreachable):
            self._drop_conn()  # a broken connection is not reused; the next call opens a new one
            raise

    def _drop_conn(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # the connection is broken already
                pass

    def close(self) -> None:
        """Closes this thread's connection of the store."""
        self._drop_conn()

    # -- one method per statement -------------------------------------------------
    def claim(self, job: str, key: str, owner: str, payload: Payload, lease_ms: int) -> Union[Claim, Snapshot]:
        """Claims the operation: the new claim, or the row as it stands when someone else has it."""
        return self._claim_on(None, job, key, owner, payload, lease_ms)

    def claim_in(self, conn, job: str, key: str, owner: str, payload: Payload, lease_ms: int) -> Union[Claim, Snapshot]:
        """:meth:`claim` on the user's connection, inside the user's transaction."""
        return self._claim_on(self.driver_connection(conn), job, key, owner, payload, lease_ms)

    def _claim_on(self, conn, job, key, owner, payload, lease_ms):
        args = params.claim(self.clock_offset_ms, job, key, owner, payload.fingerprint, payload.json, lease_ms)
        _, rows = self._exec(conn, "claim", args)
        if rows:
            return Claim.from_row(rows[0])
        return self._existing(conn, job, key, "claim")

    def _existing(self, conn, job: str, key: str, what: str) -> Snapshot:
        snap = self.get(job, key, conn=conn, raw=True)
        if snap is None:
            raise DatabaseError(f"{job}:{key} conflicted on {what} but is gone (purged meanwhile?)")
        return snap

    def _exec(self, conn, name: str, args: Sequence) -> Tuple[int, Rows]:
        return self._own(name, args) if conn is None else self._run(conn, name, args)

    def take_over(self, job: str, key: str, stale_token: int, to: State, owner: str, lease_ms: int, reason: str) -> Optional[Claim]:
        """Moves a claim past its lease to a new token in state ``to``; None when another worker moved it first."""
        args = params.take_over(self.clock_offset_ms, job, key, stale_token, to, owner, lease_ms, reason)
        _, rows = self._own("take_over", args)
        return Claim.from_row(rows[0]) if rows else None

    def move(self, p: OpMove, conn=None) -> bool:
        """One fenced transition; True when the row changed (exactly one row)."""
        if conn is not None:
            conn = self.driver_connection(conn)
        affected, _ = self._exec(conn, "move", params.move(self.clock_offset_ms, p, self._flag))
        return affected == 1

    def heartbeat(self, job: str, key: str, token: int, lease_ms: int) -> Optional[Tuple[int, bool]]:
        """Renews a live claim: (lease_until, cancel_requested), or None when the claim is no longer ours."""
        _, rows = self._own("heartbeat", params.heartbeat(self.clock_offset_ms, job, key, token, lease_ms))
        return (int(rows[0]["lease_until"]), bool(rows[0]["cancel_requested"])) if rows else None

    def request_cancel(self, job: str, key: str, token: int) -> bool:
        affected, _ = self._own("request_cancel", params.request_cancel(self.clock_offset_ms, job, key, token))
        return affected == 1

    def get(self, job: str, key: str, conn=None, raw: bool = False) -> Optional[Snapshot]:
        """One record with the database's time, or None."""
        if conn is not None and not raw:
            conn = self.driver_connection(conn)
        _, rows = self._exec(conn, "get", params.get(self.clock_offset_ms, job, key))
        return Snapshot(Record.from_row(rows[0]), int(rows[0]["now"])) if rows else None

    def enqueue(self, job: str, key: str, payload: Payload, delay_ms: int = 0, conn=None) -> bool:
        """Inserts a queued record unless one exists; True when inserted."""
        if conn is not None:
            conn = self.driver_connection(conn)
        args = params.enqueue(self.clock_offset_ms, job, key, payload.fingerprint, payload.json, delay_ms)
        affected, _ = self._exec(conn, "enqueue", args)
        return affected == 1

    def audit(self, job: str, key: str, event: str, actor: str, token: int,
              from_state: Optional[State], to: Optional[State], detail: Optional[str],
              attempt: Optional[int] = None, retry_after_ms: Optional[int] = None) -> None:
        """Appends one event; ``attempt`` and ``retry_after_ms`` only on a release."""
        args = params.audit(self.clock_offset_ms, job, key, event, actor, token, from_state, to, detail,
                            attempt, retry_after_ms)
        affected, _ = self._own("audit", args)
        if affected != 1:
            raise DatabaseError(f"audit append for {job}:{key} inserted {affected} rows")

    def history(self, job: str, key: str) -> List[AuditEvent]:
        """The operation's audit trail, oldest first."""
        _, rows = self._own("history", params.history(job, key))
        return [AuditEvent.from_row(r) for r in rows]

    # -- reading records, as the CLI's held and stuck list them -------------------
    def held(self, job: Optional[str] = None) -> List[Record]:
        """Operations held for a person (``onceonly held``), oldest claim first;
        ``job``: one job type only."""
        _, rows = self._own("operator_held", params.page(self.clock_offset_ms, job, self.all_rows, 0))
        return [Record.from_row(r) for r in rows]

    def stuck(self, job: Optional[str] = None, older_than: Any = None) -> List[Record]:
        """Claims past their lease that nobody settled (``onceonly stuck``),
        oldest claim first; ``older_than`` (``"5m"``, seconds, a timedelta):
        only those whose lease ran out at least that long ago, on the database's clock."""
        _, rows = self._own("operator_stuck", params.page(self.clock_offset_ms, job, self.all_rows, 0))
        records = [Record.from_row(r) for r in rows]
        if older_than is None:
            return records
        from ..spec import to_ms

        limit, now = to_ms(older_than, "older_than"), self.now()
        return [r for r in records if r.lease_until is not None and now - r.lease_until >= limit]

    def now(self) -> int:
        """The database's clock (plus the offset), ms since the epoch."""
        _, rows = self._own("now", params.now(self.clock_offset_ms))
        return int(rows[0]["now"])
