//! What a user gives the harness: their job, guarded and naive, and a probe
//! that counts effects at the destination.

use std::future::Future;

use onceonly::{BoxError, Guard, Outcome, Payload, Store};
use onceonly_mysql::MySqlStore;
use onceonly_postgres::PgStore;
use onceonly_sqlite::SqliteStore;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::naive::Naive;

/// What one consumer process did in the concurrent scenario through a queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumed {
    /// Its process id.
    pub pid: u32,
    /// Messages it received and settled (redeliveries included).
    pub messages: u64,
    /// Deliveries that found another worker's claim in progress: a race
    /// the guard decided.
    pub in_progress: u64,
    /// Deliveries that found the operation done already.
    pub repeats: u64,
    /// Deliveries that ended in an error (the first few, in words).
    pub errors: Vec<String>,
}

impl Consumed {
    /// Nothing consumed yet, by this process.
    pub fn new() -> Self {
        Self {
            pid: std::process::id(),
            ..Self::default()
        }
    }

    /// Notes a delivery's error (keeps the first five).
    pub fn error(&mut self, error: String) {
        if self.errors.len() < 5 {
            self.errors.push(error);
        }
    }
}

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

    /// True when deliveries go through a queue that separate consumer
    /// processes can read. The concurrent scenario then starts worker
    /// processes ([`crate::Harness::worker_command`]) that consume it
    /// ([`ReplayJob::consume`]), sends each run's message to the queue once
    /// per worker ([`ReplayJob::enqueue`]) and waits for the queue to be
    /// empty ([`ReplayJob::backlog`]) before it counts.
    fn queued(&self) -> bool {
        false
    }

    /// Sends one message for `op_key` to the job's queue (the naive
    /// version's queue when `naive`), without receiving it.
    fn enqueue(
        &self,
        op_key: &str,
        payload: &Payload,
        naive: bool,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = (op_key, payload, naive);
        async { Err("this job has no queue (ReplayJob::queued)".into()) }
    }

    /// Messages the job's queue (the naive one when `naive`) still holds.
    fn backlog(&self, naive: bool) -> impl Future<Output = Result<u64, BoxError>> + Send {
        let _ = naive;
        async { Err("this job has no queue (ReplayJob::queued)".into()) }
    }

    /// Consumes the job's queue until `stop` turns true, each message's
    /// operation through `guard`, as the production consumer does.
    fn consume(
        &self,
        guard: &Guard<S>,
        stop: watch::Receiver<bool>,
    ) -> impl Future<Output = Result<Consumed, BoxError>> + Send {
        let _ = (guard, stop);
        async { Err("this job has no queue (ReplayJob::queued)".into()) }
    }

    /// Consumes the naive version's queue until `stop` turns true: read the
    /// state, act, write it, then ack.
    fn consume_naive(
        &self,
        naive: &Naive<S>,
        stop: watch::Receiver<bool>,
    ) -> impl Future<Output = Result<Consumed, BoxError>> + Send {
        let _ = (naive, stop);
        async { Err("this job has no queue (ReplayJob::queued)".into()) }
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

impl Reconnect for MySqlStore {
    fn reconnect(&self) -> impl Future<Output = onceonly::Result<Self>> + Send {
        MySqlStore::reconnect(self)
    }
}
