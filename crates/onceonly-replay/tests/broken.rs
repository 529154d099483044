//! The harness catches broken guards: a job that acts when the claim says
//! another worker is in progress, a job that bypasses the guard, and a
//! store that completes without checking the claim's token. A correct job
//! on the same destination passes, so the failures are the bugs' doing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onceonly::store::{
    Claim, ClaimRow, Enqueued, Heartbeat, OpClaim, OpClaimBatch, OpCompleteBatch, OpEnqueue,
    OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{
    BoxError, ClockOffset, DbTime, Effect, EffectCtx, EffectKind, EffectOutcome, Guard, JobSpec,
    LookupOutcome, Outcome, Payload, Record, Snapshot, StalePolicy, Store, WithdrawOutcome,
};
use onceonly_replay::{Harness, Naive, Reconnect, ReplayJob, Report, Verdict};
use onceonly_sqlite::SqliteStore;

/// An in-memory destination with neither dedup nor lookup: every perform is
/// an item. Each perform takes a little while, as a real call does.
#[derive(Clone, Default)]
struct Destination {
    items: Arc<Mutex<HashMap<String, (usize, usize)>>>,
}

impl Destination {
    fn count(&self, key: &str) -> (usize, usize) {
        self.items
            .lock()
            .unwrap()
            .get(key)
            .copied()
            .unwrap_or((0, 0))
    }
}

impl Effect for Destination {
    async fn perform(&self, ctx: &EffectCtx) -> EffectOutcome {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut items = self.items.lock().unwrap();
        let (made, live) = items.entry(ctx.op_key.clone()).or_default();
        *made += 1;
        *live += 1;
        EffectOutcome::done_with_ref(format!("{}#{made}", ctx.op_key))
    }

    async fn lookup(&self, _ctx: &EffectCtx) -> LookupOutcome {
        LookupOutcome::Unavailable("this destination cannot be searched".into())
    }

    async fn withdraw(&self, ctx: &EffectCtx, _external_ref: &str) -> WithdrawOutcome {
        if let Some((_, live)) = self.items.lock().unwrap().get_mut(&ctx.op_key) {
            *live = live.saturating_sub(1);
        }
        WithdrawOutcome::Withdrawn
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Bug {
    /// No bug: the control.
    None,
    /// Acts anyway when the guard says another worker holds a live claim.
    ActsWhenInProgress,
    /// Never asks the guard: acts and reports done.
    BypassesGuard,
}

struct Job {
    dest: Destination,
    bug: Bug,
}

fn spec() -> JobSpec {
    JobSpec::new("send_receipt", EffectKind::Opaque(StalePolicy::AtLeastOnce))
}

impl<S: Store> ReplayJob<S> for Job {
    fn spec(&self) -> JobSpec {
        spec()
    }

    async fn deliver(
        &self,
        guard: &Guard<S>,
        op_key: &str,
        payload: &Payload,
    ) -> onceonly::Result<Outcome> {
        let ctx = EffectCtx::detached(&guard.spec().job_type, op_key, payload.value());
        let acted = || async {
            self.dest.perform(&ctx).await;
            Ok(Outcome::Done {
                result: serde_json::Value::Null,
                external_ref: None,
                repeat: false,
            })
        };
        match self.bug {
            Bug::BypassesGuard => acted().await,
            Bug::ActsWhenInProgress => match guard.run(op_key, payload, &self.dest).await? {
                Outcome::InProgress { .. } => acted().await,
                other => Ok(other),
            },
            Bug::None => guard.run(op_key, payload, &self.dest).await,
        }
    }

    async fn deliver_naive(
        &self,
        naive: &Naive<S>,
        op_key: &str,
        payload: &Payload,
    ) -> Result<(), BoxError> {
        if naive.done(op_key).await? {
            return Ok(());
        }
        let ctx = EffectCtx::detached(naive.job_type(), op_key, payload.value());
        self.dest.perform(&ctx).await;
        naive.mark_done(op_key, payload).await?;
        Ok(())
    }

    async fn effects(&self, _store: &S, op_key: &str) -> Result<usize, BoxError> {
        Ok(self.dest.count(op_key).0)
    }

    async fn live(&self, _store: &S, op_key: &str) -> Result<Option<usize>, BoxError> {
        Ok(Some(self.dest.count(op_key).1))
    }
}

/// A store that completes (and fails) an operation without checking the
/// token or the state the writer names: whatever the row is, the write lands.
#[derive(Clone)]
struct TokenBlind(SqliteStore);

impl TokenBlind {
    async fn blind<'a>(&self, p: &OpMove<'a>) -> onceonly::Result<OpMove<'a>> {
        let mut p = p.clone();
        if let Some(snap) = self.0.op_get(p.job_type, p.op_key).await? {
            p.token = snap.record.token;
            p.from = snap.record.state;
        }
        Ok(p)
    }
}

impl Reconnect for TokenBlind {
    async fn reconnect(&self) -> onceonly::Result<Self> {
        Ok(Self(self.0.reconnect().await?))
    }
}

impl Store for TokenBlind {
    type Conn = <SqliteStore as Store>::Conn;
    type Tx = <SqliteStore as Store>::Tx;

    async fn migrate(&self) -> onceonly::Result<()> {
        self.0.migrate().await
    }
    async fn begin(&self) -> onceonly::Result<Self::Tx> {
        self.0.begin().await
    }
    async fn commit(tx: Self::Tx) -> onceonly::Result<()> {
        SqliteStore::commit(tx).await
    }
    async fn op_claim(&self, p: &OpClaim<'_>) -> onceonly::Result<ClaimRow> {
        self.0.op_claim(p).await
    }
    async fn op_claim_in(
        &self,
        conn: &mut Self::Conn,
        p: &OpClaim<'_>,
    ) -> onceonly::Result<ClaimRow> {
        self.0.op_claim_in(conn, p).await
    }
    async fn op_take_over(&self, p: &OpTakeOver<'_>) -> onceonly::Result<Option<Claim>> {
        self.0.op_take_over(p).await
    }
    async fn op_move(&self, p: &OpMove<'_>) -> onceonly::Result<bool> {
        let p = self.blind(p).await?;
        self.0.op_move(&p).await
    }
    async fn op_move_in(&self, conn: &mut Self::Conn, p: &OpMove<'_>) -> onceonly::Result<bool> {
        self.0.op_move_in(conn, p).await
    }
    async fn op_heartbeat(&self, p: &OpHeartbeat<'_>) -> onceonly::Result<Option<Heartbeat>> {
        self.0.op_heartbeat(p).await
    }
    async fn op_request_cancel(&self, p: &OpRequestCancel<'_>) -> onceonly::Result<bool> {
        self.0.op_request_cancel(p).await
    }
    async fn op_get(&self, job_type: &str, op_key: &str) -> onceonly::Result<Option<Snapshot>> {
        self.0.op_get(job_type, op_key).await
    }
    async fn op_get_in(
        &self,
        conn: &mut Self::Conn,
        job_type: &str,
        op_key: &str,
    ) -> onceonly::Result<Option<Snapshot>> {
        self.0.op_get_in(conn, job_type, op_key).await
    }
    async fn op_list(&self, p: &OpList<'_>) -> onceonly::Result<Vec<Record>> {
        self.0.op_list(p).await
    }
    async fn op_purge(&self, p: &OpPurge<'_>) -> onceonly::Result<u64> {
        self.0.op_purge(p).await
    }
    async fn op_enqueue(&self, p: &OpEnqueue<'_>) -> onceonly::Result<Enqueued> {
        self.0.op_enqueue(p).await
    }
    async fn op_enqueue_in(
        &self,
        conn: &mut Self::Conn,
        p: &OpEnqueue<'_>,
    ) -> onceonly::Result<Enqueued> {
        self.0.op_enqueue_in(conn, p).await
    }
    async fn op_claim_batch(&self, p: &OpClaimBatch<'_>) -> onceonly::Result<Vec<(Record, Claim)>> {
        self.0.op_claim_batch(p).await
    }
    async fn op_complete_batch(&self, p: &OpCompleteBatch<'_>) -> onceonly::Result<Vec<String>> {
        self.0.op_complete_batch(p).await
    }
    async fn op_audit(&self, p: &onceonly::store::OpAudit<'_>) -> onceonly::Result<()> {
        self.0.op_audit(p).await
    }
    async fn op_history(
        &self,
        job_type: &str,
        op_key: &str,
    ) -> onceonly::Result<Vec<onceonly::AuditEvent>> {
        self.0.op_history(job_type, op_key).await
    }
    async fn now(&self) -> onceonly::Result<DbTime> {
        self.0.now().await
    }
    fn clock_offset(&self) -> &ClockOffset {
        self.0.clock_offset()
    }
}

async fn sqlite(dir: &tempfile::TempDir) -> SqliteStore {
    let url = format!("sqlite://{}", dir.path().join("broken.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    store
}

async fn replay<S: Reconnect>(store: S, bug: Bug) -> Report {
    let job = Job {
        dest: Destination::default(),
        bug,
    };
    let report = Harness::new(store, job)
        .runs(5)
        .workers(&[2])
        .run()
        .await
        .unwrap();
    print!("{}", report.table());
    report
}

fn verdict(report: &Report, scenario: &str) -> Verdict {
    let entry = report.entries.iter().find(|e| e.scenario == scenario);
    entry
        .unwrap_or_else(|| panic!("no entry {scenario}"))
        .verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_job_passes_so_the_failures_below_are_the_bugs() {
    let dir = tempfile::tempdir().unwrap();
    let report = replay(sqlite(&dir).await, Bug::None).await;
    assert!(report.passed(), "{}", report.table());
    // Without a worker command the SIGKILL entries say they were skipped.
    assert_eq!(report.summary().skipped, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acting_when_the_claim_is_in_progress_fails_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = replay(sqlite(&dir).await, Bug::ActsWhenInProgress).await;
    assert!(!report.passed());
    assert_eq!(
        verdict(&report, "lease"),
        Verdict::Fail,
        "the young claim was not respected"
    );
    assert_eq!(
        verdict(&report, "concurrent"),
        Verdict::Fail,
        "two workers both acted"
    );
    let lease = report
        .entries
        .iter()
        .find(|e| e.scenario == "lease")
        .unwrap();
    assert!(
        lease
            .failures
            .iter()
            .any(|f| f.contains("younger than its lease")),
        "{:?}",
        lease.failures
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bypassing_the_guard_fails_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = replay(sqlite(&dir).await, Bug::BypassesGuard).await;
    assert_eq!(
        verdict(&report, "repeat"),
        Verdict::Fail,
        "3 deliveries, 3 effects"
    );
    assert_eq!(
        verdict(&report, "crash_after_claim"),
        Verdict::Fail,
        "it never died at the claim"
    );
    let repeat = report
        .entries
        .iter()
        .find(|e| e.scenario == "repeat")
        .unwrap();
    assert_eq!(repeat.guarded.as_ref().unwrap().total, 3);
    assert!(report.summary().fail >= 8, "{}", report.table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_ignores_the_token_fails_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = replay(TokenBlind(sqlite(&dir).await), Bug::None).await;
    assert_eq!(
        verdict(&report, "failure_after_success"),
        Verdict::Fail,
        "the late failure overwrote the success"
    );
    let late = report
        .entries
        .iter()
        .find(|e| e.scenario == "failure_after_success")
        .unwrap();
    assert!(
        late.failures
            .iter()
            .any(|f| f.contains("late failure write changed no row")),
        "{:?}",
        late.failures
    );
    assert!(!report.passed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_states_every_allowed_count_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::default();
    let job = Job {
        dest: dest.clone(),
        bug: Bug::None,
    };
    let plan = Harness::new(sqlite(&dir).await, job).runs(7).plan();
    assert_eq!(
        plan.entries.len(),
        12,
        "9 scenarios: 2 worker counts, 2 deaths at 2 points"
    );
    assert!(plan
        .entries
        .iter()
        .all(|e| e.verdict == Verdict::Planned && e.guarded.is_none()));
    let claim = plan
        .entries
        .iter()
        .find(|e| e.scenario == "crash_after_claim")
        .unwrap();
    assert_eq!((claim.allowed.min, claim.allowed.max), (1, 1));
    let effect = plan
        .entries
        .iter()
        .find(|e| e.scenario == "crash_after_effect")
        .unwrap();
    assert_eq!(
        (effect.allowed.min, effect.allowed.max),
        (1, 2),
        "at-least-once: 1 extra"
    );
    assert!(plan.entries.iter().any(|e| e.runs == 7));
    assert!(
        dest.items.lock().unwrap().is_empty(),
        "planning ran nothing"
    );
}
