//! The store's own claims and moves, batched across concurrent callers.
//!
//! One statement per call leaves PostgreSQL parsing, planning and
//! committing the same two statements thousands of times a second, and the
//! client paying sqlx's cost per statement as often. Here the calls waiting
//! at one moment go as one statement: claims as `claim_many.sql` (one
//! `INSERT ... SELECT FROM unnest ... ON CONFLICT`), moves as
//! `move_many.sql` (one `UPDATE ... FROM unnest`), each on a connection of
//! its own (a lane), while the next calls queue up for the lane's next
//! statement. Each statement commits on its own, and each caller hears back
//! after that commit, with its own row's outcome: claimed or the row as it
//! stands, moved or not (its affected-row check, per operation).
//!
//! A batch holds each key once (the same key twice waits for the next
//! batch) and is sorted by job type and key, so rows are locked in one
//! order in every process. A batch statement that fails is retried one
//! call at a time, so a bad row fails only its own caller.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceonly::store::{Claim, ClaimRow, OpClaim, OpClaimBatch, OpCompleteBatch, OpMove};
use onceonly::{ClockOffset, Error, Move, Record, Result, State};
use onceonly_sqlx::map_err;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::queries::{ClaimColumns, MoveColumns, Queries};

/// What the lanes share: how to connect, the SQL, the clock.
pub(crate) struct Shared {
    pub(crate) connect: PgConnectOptions,
    pub(crate) url: String,
    pub(crate) queries: Arc<Queries>,
    pub(crate) clock: ClockOffset,
}

/// The claim and move lanes of one store; clones of the store share it, and
/// the lanes stop (closing their connections) when it is dropped.
pub(crate) struct Batcher {
    claims: mpsc::UnboundedSender<Call<OwnedClaim>>,
    moves: mpsc::UnboundedSender<Call<OwnedMove>>,
    queued_claims: mpsc::UnboundedSender<Call<OwnedClaimBatch>>,
    counts: Arc<Counts>,
}

/// What the lanes have done so far, counted.
#[derive(Debug, Default)]
struct Counts {
    batches: AtomicU64,
    calls: AtomicU64,
    one_by_one: AtomicU64,
}

/// What a store's batcher has done so far (see [`crate::PgStore::batch_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchStats {
    /// Batches run: each sent as one statement (plus one read of the claims
    /// that found a row someone else holds), or one by one.
    pub batches: u64,
    /// Calls answered.
    pub calls: u64,
    /// Batches whose statement failed and whose calls then ran one by one.
    pub one_by_one: u64,
}

impl Batcher {
    /// Starts `lanes` lanes for claims and as many for moves, each sending
    /// at most `max_batch` calls per statement.
    pub(crate) fn start(shared: Arc<Shared>, lanes: usize, max_batch: usize) -> Self {
        let counts = Arc::new(Counts::default());
        Self {
            claims: spawn_lanes(&shared, &counts, lanes, max_batch),
            moves: spawn_lanes(&shared, &counts, lanes, max_batch),
            queued_claims: spawn_lanes(&shared, &counts, lanes, max_batch),
            counts,
        }
    }

    /// The counts so far.
    pub(crate) fn stats(&self) -> BatchStats {
        BatchStats {
            batches: self.counts.batches.load(Ordering::Relaxed),
            calls: self.counts.calls.load(Ordering::Relaxed),
            one_by_one: self.counts.one_by_one.load(Ordering::Relaxed),
        }
    }

    /// [`onceonly::Store::op_claim`], in the next claim batch.
    pub(crate) async fn claim(&self, p: &OpClaim<'_>) -> Result<ClaimRow> {
        send(&self.claims, OwnedClaim::from(p)).await
    }

    /// [`onceonly::Store::op_move`], in the next move batch.
    pub(crate) async fn move_op(&self, p: &OpMove<'_>) -> Result<bool> {
        send(&self.moves, OwnedMove::from(p)).await
    }

    /// [`onceonly::Store::op_complete_batch`] as moves to completed, all
    /// queued at once (so they share the next move statements, with other
    /// callers' moves): one statement without a transaction around it, where
    /// `complete_batch.sql` needs BEGIN, SET LOCAL and COMMIT. Returns the
    /// keys completed; the first error when any move failed.
    pub(crate) async fn complete(&self, p: &OpCompleteBatch<'_>) -> Result<Vec<String>> {
        let mut answers = Vec::with_capacity(p.items.len());
        for item in p.items {
            let m = Move::Complete
                .op(p.job_type, item.op_key, item.token)
                .with_external_ref(item.external_ref)
                .with_result(item.result);
            answers.push((item.op_key, enqueue(&self.moves, OwnedMove::from(&m))?));
        }
        let mut completed = Vec::with_capacity(answers.len());
        let mut failed = None;
        for (key, moved) in answers {
            match answer(moved).await {
                Ok(true) => completed.push(key.to_owned()),
                Ok(false) => {}
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(completed),
        }
    }

    /// [`onceonly::Store::op_claim_batch`]: the relay loops' claims of
    /// queued rows waiting at one moment, for the same job type, owner and
    /// lease, go as one `claim_batch.sql` for all of them.
    pub(crate) async fn claim_queued(&self, p: &OpClaimBatch<'_>) -> Result<Vec<(Record, Claim)>> {
        send(&self.queued_claims, OwnedClaimBatch::from(p)).await
    }
}

/// One caller's request and where its answer goes.
struct Call<B: Batch> {
    op: B,
    reply: oneshot::Sender<Result<B::Out>>,
}

/// A kind of call that lanes run in batches.
trait Batch: Send + Sized + 'static {
    /// What one caller hears back.
    type Out: Send + 'static;

    /// Calls with the same key go in different batches.
    const ONE_PER_KEY: bool = true;

    /// The row the call writes: (job type, key).
    fn key(&self) -> (&str, &str);

    /// Runs `ops` (each key once, sorted by key) and returns one outcome
    /// per op, in order.
    fn run(lane: &mut Lane, ops: &[Self]) -> impl Future<Output = Vec<Result<Self::Out>>> + Send;
}

async fn send<B: Batch>(lane: &mpsc::UnboundedSender<Call<B>>, op: B) -> Result<B::Out> {
    answer(enqueue(lane, op)?).await
}

/// Queues `op` for the lane's next batch; its answer comes on the receiver.
fn enqueue<B: Batch>(
    lane: &mpsc::UnboundedSender<Call<B>>,
    op: B,
) -> Result<oneshot::Receiver<Result<B::Out>>> {
    let (reply, answer) = oneshot::channel();
    lane.send(Call { op, reply }).map_err(|_| stopped())?;
    Ok(answer)
}

async fn answer<T>(answer: oneshot::Receiver<Result<T>>) -> Result<T> {
    answer.await.map_err(|_| stopped())?
}

fn stopped() -> Error {
    Error::Database("the PostgreSQL store's batcher has stopped".into())
}

fn spawn_lanes<B: Batch>(
    shared: &Arc<Shared>,
    counts: &Arc<Counts>,
    lanes: usize,
    max_batch: usize,
) -> mpsc::UnboundedSender<Call<B>> {
    let (calls, queue) = mpsc::unbounded_channel();
    let queue = Arc::new(Mutex::new(queue));
    for _ in 0..lanes.max(1) {
        let mut lane = Lane {
            shared: shared.clone(),
            counts: counts.clone(),
            conn: None,
        };
        let queue = queue.clone();
        tokio::spawn(async move { serve::<B>(&mut lane, &queue, max_batch.max(1)).await });
    }
    calls
}

/// Takes the calls waiting, runs them as one batch, answers, and again,
/// until the store is dropped.
async fn serve<B: Batch>(
    lane: &mut Lane,
    queue: &Mutex<mpsc::UnboundedReceiver<Call<B>>>,
    max_batch: usize,
) {
    // Calls whose key was already in a batch: the next batch takes them first.
    let mut held: Vec<Call<B>> = Vec::new();
    loop {
        let mut calls = std::mem::take(&mut held);
        if calls.is_empty() {
            // Waiting for a first call, holding the queue: another lane
            // cannot take it meanwhile, and needs nothing from it.
            let mut queue = queue.lock().await;
            match queue.recv().await {
                Some(call) => calls.push(call),
                None => return,
            }
            take_waiting(&mut queue, &mut calls, max_batch);
        } else if let Ok(mut queue) = queue.try_lock() {
            // Held calls go now: another lane may hold the queue while it
            // waits for a call that may never come.
            take_waiting(&mut queue, &mut calls, max_batch);
        }
        // A caller that has gone (its future dropped) is not written for.
        calls.retain(|c| !c.reply.is_closed());
        let (batch, again) = match B::ONE_PER_KEY {
            true => one_per_key(calls),
            false => (calls, Vec::new()),
        };
        held = again;
        if batch.is_empty() {
            continue;
        }
        let (ops, replies): (Vec<B>, Vec<_>) = batch.into_iter().map(|c| (c.op, c.reply)).unzip();
        let outcomes = B::run(lane, &ops).await;
        debug_assert_eq!(outcomes.len(), replies.len());
        lane.counts.batches.fetch_add(1, Ordering::Relaxed);
        lane.counts
            .calls
            .fetch_add(ops.len() as u64, Ordering::Relaxed);
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }
}

/// Adds the calls waiting in `queue` to `calls`, up to `max_batch` in all.
fn take_waiting<B: Batch>(
    queue: &mut mpsc::UnboundedReceiver<Call<B>>,
    calls: &mut Vec<Call<B>>,
    max_batch: usize,
) {
    while calls.len() < max_batch {
        match queue.try_recv() {
            Ok(call) => calls.push(call),
            Err(_) => break,
        }
    }
}

/// Sorts `calls` by key and splits off every call whose key came earlier,
/// keeping their arrival order among themselves.
fn one_per_key<B: Batch>(mut calls: Vec<Call<B>>) -> (Vec<Call<B>>, Vec<Call<B>>) {
    // Stable: the first to arrive of a key goes first.
    calls.sort_by(|a, b| a.op.key().cmp(&b.op.key()));
    let mut batch: Vec<Call<B>> = Vec::with_capacity(calls.len());
    let mut again = Vec::new();
    for call in calls {
        match batch.last() {
            Some(last) if last.op.key() == call.op.key() => again.push(call),
            _ => batch.push(call),
        }
    }
    (batch, again)
}

/// One lane's connection, opened when first needed and again after it broke.
pub(crate) struct Lane {
    shared: Arc<Shared>,
    counts: Arc<Counts>,
    conn: Option<PgConnection>,
}

impl Lane {
    fn err(&self, e: sqlx::Error) -> Error {
        map_err(&self.shared.url)(e)
    }

    fn offset(&self) -> i64 {
        self.shared.clock.millis()
    }

    async fn conn(&mut self) -> sqlx::Result<&mut PgConnection> {
        if self.conn.is_none() {
            self.conn = Some(PgConnection::connect_with(&self.shared.connect).await?);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Counts a batch whose statement failed, to run one call at a time.
    fn one_by_one(&self, e: &Error, calls: usize) {
        self.counts.one_by_one.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(error = %e, calls, "a batch statement failed; running its calls one by one");
    }

    /// Keeps the connection unless it failed other than with a database
    /// error (then the next statement reconnects).
    fn failed(&mut self, e: sqlx::Error) -> Error {
        if !matches!(e, sqlx::Error::Database(_)) {
            self.conn = None;
        }
        self.err(e)
    }
}

/// Runs one query of [`Queries`] on the lane's connection:
/// `statement!(lane, claim_many, args...)`.
macro_rules! statement {
    ($lane:expr, $query:ident $(, $arg:expr)*) => {{
        let queries = $lane.shared.queries.clone();
        let offset = $lane.offset();
        let done = match $lane.conn().await {
            Ok(conn) => queries.$query(conn, offset $(, $arg)*).await,
            Err(e) => Err(e),
        };
        done.map_err(|e| $lane.failed(e))
    }};
}

/// An [`OpClaim`] that owns its text, to cross into a lane.
struct OwnedClaim {
    job_type: String,
    op_key: String,
    fingerprint: String,
    payload: Option<String>,
    owner: String,
    lease: Duration,
}

impl OwnedClaim {
    fn from(p: &OpClaim<'_>) -> Self {
        Self {
            job_type: p.job_type.to_owned(),
            op_key: p.op_key.to_owned(),
            fingerprint: p.fingerprint.to_owned(),
            payload: p.payload.map(str::to_owned),
            owner: p.owner.to_owned(),
            lease: p.lease,
        }
    }

    fn op(&self) -> OpClaim<'_> {
        OpClaim {
            job_type: &self.job_type,
            op_key: &self.op_key,
            fingerprint: &self.fingerprint,
            payload: self.payload.as_deref(),
            owner: &self.owner,
            lease: self.lease,
        }
    }
}

impl Batch for OwnedClaim {
    type Out = ClaimRow;

    fn key(&self) -> (&str, &str) {
        (&self.job_type, &self.op_key)
    }

    async fn run(lane: &mut Lane, ops: &[Self]) -> Vec<Result<ClaimRow>> {
        if ops.len() > 1 {
            match claim_many(lane, ops).await {
                Ok(outcomes) => return outcomes,
                Err(e) => lane.one_by_one(&e, ops.len()),
            }
        }
        let mut outcomes = Vec::with_capacity(ops.len());
        for op in ops {
            outcomes.push(claim_one(lane, op).await);
        }
        outcomes
    }
}

/// The batch's claims in one statement, then one read of the rows it did
/// not claim. `Err` only when the claim statement failed (it wrote nothing).
async fn claim_many(lane: &mut Lane, ops: &[OwnedClaim]) -> Result<Vec<Result<ClaimRow>>> {
    let mut columns = ClaimColumns::default();
    ops.iter().for_each(|op| columns.push(&op.op()));
    let claimed = statement!(lane, claim_many, &columns)?;
    let mut claimed: HashMap<(String, String), _> = claimed
        .into_iter()
        .map(|(job, key, claim)| ((job, key), claim))
        .collect();
    let (mut jobs, mut keys) = (Vec::new(), Vec::new());
    for op in ops {
        if !claimed.contains_key(&(op.job_type.clone(), op.op_key.clone())) {
            jobs.push(op.job_type.as_str());
            keys.push(op.op_key.as_str());
        }
    }
    // The claims above are committed: a failed read fails only the calls
    // that were not claimed.
    let mut existing = HashMap::new();
    let mut read_failed = None;
    if !keys.is_empty() {
        match statement!(lane, get_many, &jobs, &keys) {
            Ok(snaps) => {
                for snap in snaps {
                    let id = (snap.record.job_type.clone(), snap.record.op_key.clone());
                    existing.insert(id, snap);
                }
            }
            Err(e) => read_failed = Some(e),
        }
    }
    Ok(ops
        .iter()
        .map(|op| {
            let id = (op.job_type.clone(), op.op_key.clone());
            if let Some(claim) = claimed.remove(&id) {
                return Ok(ClaimRow::Claimed(claim));
            }
            if let Some(e) = &read_failed {
                return Err(e.shared());
            }
            match existing.remove(&id) {
                Some(snap) => Ok(ClaimRow::Existing(Box::new(snap))),
                None => Err(gone(op)),
            }
        })
        .collect())
}

/// One claim on its own: `claim.sql`, then the row if it was not ours.
async fn claim_one(lane: &mut Lane, op: &OwnedClaim) -> Result<ClaimRow> {
    let p = &op.op();
    let claimed = statement!(lane, claim, p)?;
    if let Some(claim) = claimed {
        return Ok(ClaimRow::Claimed(claim));
    }
    let (job, key) = (op.job_type.as_str(), op.op_key.as_str());
    match statement!(lane, get, job, key)? {
        Some(snap) => Ok(ClaimRow::Existing(Box::new(snap))),
        None => Err(gone(op)),
    }
}

fn gone(op: &OwnedClaim) -> Error {
    Error::Database(format!(
        "{}:{} conflicted on claim but is gone (purged meanwhile?)",
        op.job_type, op.op_key
    ))
}

/// An [`OpMove`] that owns its text, to cross into a lane.
struct OwnedMove {
    job_type: String,
    op_key: String,
    token: i64,
    from: State,
    to: State,
    unless_cancel_requested: bool,
    external_ref: Option<String>,
    result: Option<String>,
    error: Option<String>,
    retry_after: Option<Duration>,
}

impl OwnedMove {
    fn from(p: &OpMove<'_>) -> Self {
        Self {
            job_type: p.job_type.to_owned(),
            op_key: p.op_key.to_owned(),
            token: p.token,
            from: p.from,
            to: p.to,
            unless_cancel_requested: p.unless_cancel_requested,
            external_ref: p.external_ref.map(str::to_owned),
            result: p.result.map(str::to_owned),
            error: p.error.map(str::to_owned),
            retry_after: p.retry_after,
        }
    }

    fn op(&self) -> OpMove<'_> {
        OpMove {
            job_type: &self.job_type,
            op_key: &self.op_key,
            token: self.token,
            from: self.from,
            to: self.to,
            unless_cancel_requested: self.unless_cancel_requested,
            external_ref: self.external_ref.as_deref(),
            result: self.result.as_deref(),
            error: self.error.as_deref(),
            retry_after: self.retry_after,
        }
    }
}

impl Batch for OwnedMove {
    type Out = bool;

    fn key(&self) -> (&str, &str) {
        (&self.job_type, &self.op_key)
    }

    async fn run(lane: &mut Lane, ops: &[Self]) -> Vec<Result<bool>> {
        if ops.len() > 1 {
            let mut columns = MoveColumns::default();
            ops.iter().for_each(|op| columns.push(&op.op()));
            match statement!(lane, move_many, &columns) {
                Ok(moved) => {
                    let moved: HashSet<(String, String)> = moved.into_iter().collect();
                    return ops
                        .iter()
                        .map(|op| Ok(moved.contains(&(op.job_type.clone(), op.op_key.clone()))))
                        .collect();
                }
                Err(e) => lane.one_by_one(&e, ops.len()),
            }
        }
        let mut outcomes = Vec::with_capacity(ops.len());
        for op in ops {
            let p = &op.op();
            let moved = statement!(lane, move_op, p);
            // The affected-row check, per operation: 1 moved, 0 not ours.
            outcomes.push(moved.map(|affected| affected == 1));
        }
        outcomes
    }
}

/// An [`OpClaimBatch`] that owns its text, to cross into a lane.
struct OwnedClaimBatch {
    job_type: String,
    owner: String,
    lease: Duration,
    limit: u32,
}

impl OwnedClaimBatch {
    fn from(p: &OpClaimBatch<'_>) -> Self {
        Self {
            job_type: p.job_type.to_owned(),
            owner: p.owner.to_owned(),
            lease: p.lease,
            limit: p.limit,
        }
    }
}

impl Batch for OwnedClaimBatch {
    type Out = Vec<(Record, Claim)>;

    /// Claims that share a statement share a key: they all go together.
    const ONE_PER_KEY: bool = false;

    fn key(&self) -> (&str, &str) {
        (&self.job_type, &self.owner)
    }

    /// One statement per (job type, owner, lease), claiming the sum of the
    /// limits; its rows are dealt out in turn, each call up to its limit,
    /// so every call gets rows while there are enough for all.
    async fn run(lane: &mut Lane, ops: &[Self]) -> Vec<Result<Self::Out>> {
        let mut groups: HashMap<(&str, &str, Duration), Vec<usize>> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            groups
                .entry((&op.job_type, &op.owner, op.lease))
                .or_default()
                .push(i);
        }
        let mut outcomes: Vec<Result<Self::Out>> = ops.iter().map(|_| Ok(Vec::new())).collect();
        for ((job_type, owner, lease), members) in groups {
            let limit = members
                .iter()
                .fold(0_u32, |sum, &i| sum.saturating_add(ops[i].limit));
            let p = OpClaimBatch {
                job_type,
                owner,
                lease,
                limit,
            };
            let rows = match statement!(lane, claim_batch, &p) {
                Ok(rows) => rows,
                Err(e) => {
                    for &i in &members {
                        outcomes[i] = Err(e.shared());
                    }
                    continue;
                }
            };
            let mut turn = members.iter().cycle();
            for row in rows {
                // Every row has a taker: the statement claimed at most the sum.
                let taker = turn
                    .by_ref()
                    .find(
                        |&&i| matches!(&outcomes[i], Ok(got) if got.len() < ops[i].limit as usize),
                    )
                    .copied()
                    .expect("no more rows than the limits' sum");
                if let Ok(got) = &mut outcomes[taker] {
                    got.push(row);
                }
            }
        }
        outcomes
    }
}
