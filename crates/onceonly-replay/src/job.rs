//! What a user gives the harness: their job, guarded and naive, and a probe
//! that counts effects at the destination.

use std::future::Future;

use onceonly::{BoxError, Guard, Outcome, Payload, Store};
use onceonly_postgres::PgStore;
use onceonly_sqlite::SqliteStore;

use crate::naive::Naive;

/// A job under test.
///
/// The harness builds every [`Guard`] itself (so it can set fault hooks and
/// owners) and hands it to [`ReplayJob::deliver`]; it builds every [`Naive`]
/// state and hands it to [`ReplayJob::deliver_naive`]. Operation keys are
/// fresh for every scenario, so the probe counts one scenario at a time.
pub trait ReplayJob<S: Store>: Send + Sync + 'static {
    /// The job's spec: job type, effect kind and policy, lease, timeout.
    fn spec(&self) -> onceonly::JobSpec;

    /// Where the operation key comes from, in words, for the one-page note.
    fn describe_key(&self) -> String {
        "the operation key given to deliver()".into()
    }

    /// A payload for the job; `variant` tells different operations apart
    /// (scenario 9 offers variant 2 under the key of variant 1).
    fn payload(&self, variant: u32) -> serde_json::Value {
        serde_json::json!({ "order": variant, "amount_cents": 4200, "currency": "EUR" })
    }

    /// One delivery of the message, through `guard` (the job's handler as it
    /// runs in production).
    fn deliver(
        &self,
        guard: &Guard<S>,
        op_key: &str,
        payload: &Payload,
    ) -> impl Future<Output = onceonly::Result<Outcome>> + Send;

    /// One delivery without the guard: read the state (`naive.done`), act,
    /// then write it (`naive.mark_done`).
    fn deliver_naive(
        &self,
        naive: &Naive<S>,
        op_key: &str,
        payload: &Payload,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// The probe: effects made at the destination for `op_key`, withdrawn
    /// ones included.
    fn effects(
        &self,
        store: &S,
        op_key: &str,
    ) -> impl Future<Output = Result<usize, BoxError>> + Send;

    /// Effects for `op_key` still live at the destination; `None` when the
    /// destination cannot tell (scenario 7 then judges by the record alone).
    fn live(
        &self,
        store: &S,
        op_key: &str,
    ) -> impl Future<Output = Result<Option<usize>, BoxError>> + Send {
        let _ = (store, op_key);
        async { Ok(None) }
    }
}

/// A store that can open another store on the same database with its own
/// connections, sharing its clock offset: a second worker.
pub trait Reconnect: Store + Clone {
    /// Another store on the same database, sharing this one's clock offset.
    fn reconnect(&self) -> impl Future<Output = onceonly::Result<Self>> + Send;
}

impl Reconnect for SqliteStore {
    fn reconnect(&self) -> impl Future<Output = onceonly::Result<Self>> + Send {
        SqliteStore::reconnect(self)
    }
}

impl Reconnect for PgStore {
    fn reconnect(&self) -> impl Future<Output = onceonly::Result<Self>> + Send {
        PgStore::reconnect(self)
    }
}
