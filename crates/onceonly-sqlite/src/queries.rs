//! One builder per query file: the SQL text and its arguments, owned, so
//! that the same query runs on the store's own connection ([`crate::direct`])
//! or in the user's sqlx transaction ([`crate::in_tx`]). Builders decide
//! nothing and touch no connection.

use crate::sql::{CLAIM, CLAIM_NEW, MOVE};
use onceonly::store::{
    Claim, OpAudit, OpClaim, OpClaimBatch, OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge,
    OpRequestCancel, OpTakeOver,
};
use onceonly::{DbTime, State};
use onceonly_sqlx::millis;
use rusqlite::types::Value;

const TAKE_OVER: &str = include_str!("../queries/take_over.sql");
const HEARTBEAT: &str = include_str!("../queries/heartbeat.sql");
const REQUEST_CANCEL: &str = include_str!("../queries/request_cancel.sql");
const GET: &str = include_str!("../queries/get.sql");
const LIST: &str = include_str!("../queries/list.sql");
const LIST_QUEUED: &str = include_str!("../queries/list_queued.sql");
const LIST_CLAIMED: &str = include_str!("../queries/list_claimed.sql");
const PURGE: &str = include_str!("../queries/purge.sql");
const PURGE_AUDIT: &str = include_str!("../queries/purge_audit.sql");
const ENQUEUE: &str = include_str!("../queries/enqueue.sql");
const CLAIM_BATCH: &str = include_str!("../queries/claim_batch.sql");
const NOW: &str = include_str!("../queries/now.sql");
const AUDIT: &str = include_str!("../queries/audit.sql");
const HISTORY: &str = include_str!("../queries/history.sql");

/// A statement and its arguments, bound in order to `?1`, `?2`, ...
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub sql: &'static str,
    pub args: Vec<Value>,
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn opt_text(s: Option<&str>) -> Value {
    s.map_or(Value::Null, text)
}

fn int(i: i64) -> Value {
    Value::Integer(i)
}

fn ms(d: std::time::Duration) -> Value {
    int(millis(d))
}

/// `offset` is the clock shift every query takes as `?1` (see
/// [`onceonly::ClockOffset`]).
pub(crate) fn claim(offset: i64, p: &OpClaim<'_>) -> Query {
    Query {
        sql: CLAIM,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.op_key),
            text(p.owner),
            text(p.fingerprint),
            opt_text(p.payload),
            ms(p.lease),
        ],
    }
}

/// The insert of a new record, claimed, waiting for the clock: see
/// [`NewClaim::at`]. It binds `claim`'s arguments, and the clock as `?8`.
pub(crate) fn claim_new(offset: i64, p: &OpClaim<'_>) -> NewClaim {
    let mut query = claim(offset, p);
    query.sql = CLAIM_NEW;
    query.args.push(Value::Null);
    NewClaim {
        offset,
        lease_ms: millis(p.lease),
        query,
    }
}

/// `claim_new.sql`, built but for its clock, bound when it runs.
#[derive(Debug)]
pub(crate) struct NewClaim {
    offset: i64,
    lease_ms: i64,
    query: Query,
}

impl NewClaim {
    /// The statement stamped with `clock_ms` (SQLite's clock, unshifted),
    /// and the claim it makes if it inserts.
    pub(crate) fn at(mut self, clock_ms: i64) -> (Query, Claim) {
        self.query.args[7] = int(clock_ms);
        let now = clock_ms + self.offset;
        let claim = Claim {
            token: 1,
            attempts: 1,
            claimed_at: DbTime(now),
            lease_until: DbTime(now + self.lease_ms),
        };
        (self.query, claim)
    }
}

pub(crate) fn take_over(offset: i64, p: &OpTakeOver<'_>) -> Query {
    Query {
        sql: TAKE_OVER,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.op_key),
            int(p.stale_token),
            text(p.to.as_str()),
            text(p.owner),
            ms(p.lease),
            text(p.reason),
        ],
    }
}

/// Affects 1 row when moved, 0 when not ours or not in `from`.
pub(crate) fn move_op(offset: i64, p: &OpMove<'_>) -> Query {
    Query {
        sql: MOVE,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.op_key),
            int(p.token),
            text(p.from.as_str()),
            text(p.to.as_str()),
            opt_text(p.external_ref),
            opt_text(p.result),
            opt_text(p.error),
            int(i64::from(p.unless_cancel_requested)),
            int(p.retry_after.map_or(0, millis)),
        ],
    }
}

pub(crate) fn heartbeat(offset: i64, p: &OpHeartbeat<'_>) -> Query {
    Query {
        sql: HEARTBEAT,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.op_key),
            int(p.token),
            ms(p.lease),
        ],
    }
}

pub(crate) fn request_cancel(offset: i64, p: &OpRequestCancel<'_>) -> Query {
    Query {
        sql: REQUEST_CANCEL,
        args: vec![int(offset), text(p.job_type), text(p.op_key), int(p.token)],
    }
}

pub(crate) fn get(offset: i64, job_type: &str, op_key: &str) -> Query {
    Query {
        sql: GET,
        args: vec![int(offset), text(job_type), text(op_key)],
    }
}

/// Lists of one job type's queued rows or live claims (the relay's sweeps)
/// read their partial index; any other list reads the whole table.
pub(crate) fn list(offset: i64, p: &OpList<'_>) -> Query {
    let sql = match (p.job_type, p.state, p.lease_expired) {
        (Some(_), Some(State::Queued), false) => LIST_QUEUED,
        (Some(_), Some(State::Claimed), _) => LIST_CLAIMED,
        _ => LIST,
    };
    Query {
        sql,
        args: vec![
            int(offset),
            opt_text(p.job_type),
            opt_text(p.state.map(|s| s.as_str())),
            int(i64::from(p.lease_expired)),
            int(p.limit.map_or(-1, i64::from)),
        ],
    }
}

pub(crate) fn purge(offset: i64, p: &OpPurge<'_>) -> Query {
    Query {
        sql: PURGE,
        args: vec![int(offset), opt_text(p.job_type), ms(p.older_than)],
    }
}

/// Deletes the audit rows whose record is gone.
pub(crate) fn purge_audit(job_type: Option<&str>) -> Query {
    Query {
        sql: PURGE_AUDIT,
        args: vec![opt_text(job_type)],
    }
}

/// Affects 1 row when inserted, 0 when the record existed.
pub(crate) fn enqueue(offset: i64, p: &OpEnqueue<'_>) -> Query {
    Query {
        sql: ENQUEUE,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.op_key),
            text(p.fingerprint),
            opt_text(p.payload),
            int(p.delay.map_or(0, millis)),
        ],
    }
}

pub(crate) fn claim_batch(offset: i64, p: &OpClaimBatch<'_>) -> Query {
    Query {
        sql: CLAIM_BATCH,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.owner),
            ms(p.lease),
            int(i64::from(p.limit)),
        ],
    }
}

pub(crate) fn now(offset: i64) -> Query {
    Query {
        sql: NOW,
        args: vec![int(offset)],
    }
}

/// Affects 1 row: appended.
pub(crate) fn audit(offset: i64, p: &OpAudit<'_>) -> Query {
    Query {
        sql: AUDIT,
        args: vec![
            int(offset),
            text(p.job_type),
            text(p.op_key),
            text(p.event.as_str()),
            text(p.actor),
            int(p.token),
            opt_text(p.from.map(|s| s.as_str())),
            opt_text(p.to.map(|s| s.as_str())),
            opt_text(p.detail),
            p.attempt.map_or(Value::Null, int),
            p.retry_after.map_or(Value::Null, ms),
        ],
    }
}

pub(crate) fn history(job_type: &str, op_key: &str) -> Query {
    Query {
        sql: HISTORY,
        args: vec![text(job_type), text(op_key)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Column `column` of `explain` (`EXPLAIN` or `EXPLAIN QUERY PLAN`)
    /// run on `q`, on a migrated, empty database.
    fn explained(explain: &str, column: usize, q: &Query) -> Vec<String> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for m in crate::MIGRATIONS {
            conn.execute_batch(m.sql).unwrap();
        }
        let mut stmt = conn.prepare(&format!("{explain} {}", q.sql)).unwrap();
        let rows = stmt
            .query_map(rusqlite::params_from_iter(q.args.iter()), |r| {
                r.get::<_, String>(column)
            })
            .unwrap();
        rows.collect::<rusqlite::Result<Vec<_>>>().unwrap()
    }

    /// The plan SQLite picks for `q`.
    fn plan(q: &Query) -> String {
        explained("EXPLAIN QUERY PLAN", 3, q).join("; ")
    }

    /// The opcodes SQLite compiles `q` to.
    fn opcodes(q: &Query) -> Vec<String> {
        explained("EXPLAIN", 1, q)
    }

    fn listing(state: State, lease_expired: bool) -> Query {
        list(
            0,
            &OpList {
                job_type: Some("mail"),
                state: Some(state),
                lease_expired,
                limit: Some(1),
            },
        )
    }

    #[test]
    fn the_relays_sweeps_read_their_partial_index_not_the_history() {
        let stale = plan(&listing(State::Claimed, true));
        assert!(stale.contains("onceonly_ops_claimed"), "{stale}");
        let queued = plan(&listing(State::Queued, false));
        assert!(queued.contains("onceonly_ops_queued"), "{queued}");
        let claim = plan(&claim_batch(
            0,
            &OpClaimBatch {
                job_type: "mail",
                owner: "relay",
                lease: std::time::Duration::from_secs(30),
                limit: 10,
            },
        ));
        assert!(claim.contains("onceonly_ops_queued"), "{claim}");
    }

    #[test]
    fn purge_reads_the_finished_index_not_the_history() {
        let purge = plan(&purge(
            0,
            &OpPurge {
                job_type: None,
                older_than: std::time::Duration::from_secs(3600),
            },
        ));
        assert!(purge.contains("onceonly_ops_finished"), "{purge}");
    }

    /// A constant `IN (...)` list or a RETURNING clause makes SQLite build a
    /// temporary b-tree each time the statement runs; the two writes of every
    /// operation must not (migration 0004 took them out of the CHECK and the
    /// finished index; `claim_new.sql` does without RETURNING).
    #[test]
    fn a_claim_and_its_completion_build_no_temporary_btree() {
        let op = OpClaim {
            job_type: "mail",
            op_key: "order-1",
            fingerprint: "fp",
            payload: None,
            owner: "w",
            lease: std::time::Duration::from_secs(30),
        };
        let (insert, _) = claim_new(0, &op).at(0);
        let complete = move_op(
            0,
            &OpMove::new("mail", "order-1", 1, State::Claimed, State::Completed),
        );
        for q in [insert, complete] {
            let ephemeral = opcodes(&q).iter().filter(|o| *o == "OpenEphemeral").count();
            assert_eq!(ephemeral, 0, "{}", q.sql);
        }
    }
}
