//! The guard's decisions, once: a pure step machine (sans-IO).
//!
//! A [`Decider`] is made for one delivery ([`Entry`]) of one job ([`Job`]).
//! [`Decider::next`] returns the next [`Step`] for the interpreter to take
//! (run a statement, append an audit event, call the effect, sleep, ...)
//! and is given the [`Answer`] to the step it returned last, until a step
//! ends the delivery ([`Step::Finish`] with an [`Outcome`], or
//! [`Step::Error`] with a [`Failure`]). It does no I/O, reads no clock and
//! never waits: every fact it decides on comes in an answer. Every message
//! it writes (into the record, the audit trail and the outcome) is worded
//! here, so the interpreters (the Rust guard, relay and batcher, the model
//! checker, the Python, Ruby and PHP guards) word nothing themselves.
//!
//! `protocol/decisions.json` holds the paths this machine takes, step by
//! step, for the other languages' ports to replay (a test in this crate
//! writes it and fails when it differs); `docs/protocol.md` describes it.
//!
//! The machine is written as straight-line code over its answers: each call
//! of [`Decider::next`] runs it from the start, feeding the answers given so
//! far, and stops at the first step without one. A delivery takes at most a
//! few dozen steps, so this costs nothing next to one statement.

use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::OpMove;
use super::{cancel_unsent, policy, Move, Settle};
use crate::audit::AuditKind;
use crate::fault::FaultPoint;
use crate::record::{Snapshot, State};
use crate::spec::{EffectKind, JobSpec, StalePolicy};

/// What the machine needs to know of the job: its effect kind (and stale
/// policy), how often it retries under one claim, its lease and timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Job {
    /// The effect kind and, for opaque effects, the stale-claim policy.
    pub effect: EffectKind,
    /// How many times a not-sent (or, keyed and lookup, unknown) outcome is
    /// tried again under one claim.
    pub max_retries: u32,
    /// How long a claim is live (reported for a claim being taken over).
    pub lease_ms: u64,
    /// The job timeout: the whole attempt (named in the timed-out message).
    pub timeout_ms: u64,
}

impl Job {
    /// The machine's view of `spec`.
    pub fn of(spec: &JobSpec) -> Job {
        Job {
            effect: spec.effect,
            max_retries: spec.max_retries,
            lease_ms: millis(spec.lease),
            timeout_ms: millis(spec.timeout),
        }
    }
}

impl Serialize for Job {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Form {
            effect: &'static str,
            on_stale: Option<&'static str>,
            max_retries: u32,
            lease_ms: u64,
            timeout_ms: u64,
        }
        let on_stale = match self.effect {
            EffectKind::Opaque(StalePolicy::Hold) => Some("hold"),
            EffectKind::Opaque(StalePolicy::AtLeastOnce) => Some("at_least_once"),
            EffectKind::Opaque(StalePolicy::AtMostOnce) => Some("at_most_once"),
            _ => None,
        };
        Form {
            effect: self.effect.name(),
            on_stale,
            max_retries: self.max_retries,
            lease_ms: self.lease_ms,
            timeout_ms: self.timeout_ms,
        }
        .serialize(s)
    }
}

/// A claim this worker holds: its fencing token and the claims taken so
/// far, this one included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Claimed {
    /// The fencing token every later write names.
    pub token: i64,
    /// How many claims the operation has seen, this one included.
    pub attempts: i64,
}

/// How a delivery starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum Entry {
    /// One delivery of a keyed, lookup or opaque job ([`crate::Guard::run`]):
    /// first a claim.
    Run {
        /// The fingerprint of the delivery's payload.
        fingerprint: String,
    },
    /// A claim taken elsewhere (a relay's batch claim of queued rows):
    /// acts under it.
    RunClaimed {
        /// The claim.
        claim: Claimed,
    },
    /// A claim taken elsewhere, given back before acting (a relay stopping).
    ReleaseUnstarted {
        /// The claim.
        claim: Claimed,
        /// Why it is given back.
        reason: String,
    },
    /// A local effect inside the caller's transaction: the claim, the
    /// effect and the completion in one transaction.
    Local {
        /// The fingerprint of the delivery's payload.
        fingerprint: String,
    },
}

/// A row as a statement read it, with the database's clock at the read
/// (times are milliseconds on that clock).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoredRow {
    /// Where the operation stands.
    pub state: State,
    /// The fencing token.
    pub token: i64,
    /// Claims taken.
    pub attempts: i64,
    /// Who holds or last held the claim.
    pub owner: Option<String>,
    /// The stored payload's fingerprint.
    pub fingerprint: String,
    /// When the current or last claim was taken.
    pub claimed_at_ms: Option<i64>,
    /// Until when the current claim is live.
    pub lease_until_ms: Option<i64>,
    /// When a queued operation is due.
    pub due_at_ms: Option<i64>,
    /// The effect's reference at the destination.
    pub external_ref: Option<String>,
    /// The stored result's JSON text.
    pub result: Option<String>,
    /// The last error or the reason for the state.
    pub error: Option<String>,
    /// An operator asked to cancel.
    pub cancel_requested: bool,
    /// The database's clock when the row was read.
    pub now_ms: i64,
}

impl From<&Snapshot> for StoredRow {
    fn from(snap: &Snapshot) -> Self {
        let r = &snap.record;
        StoredRow {
            state: r.state,
            token: r.token,
            attempts: r.attempts,
            owner: r.owner.clone(),
            fingerprint: r.fingerprint.clone(),
            claimed_at_ms: r.claimed_at.map(|t| t.0),
            lease_until_ms: r.lease_until.map(|t| t.0),
            due_at_ms: r.due_at.map(|t| t.0),
            external_ref: r.external_ref.clone(),
            result: r.result.clone(),
            error: r.error.clone(),
            cancel_requested: r.cancel_requested,
            now_ms: snap.now.0,
        }
    }
}

impl StoredRow {
    fn lease_expired(&self) -> bool {
        self.lease_until_ms.is_none_or(|until| until <= self.now_ms)
    }

    fn result_value(&self) -> Value {
        self.result
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or(Value::Null)
    }

    /// How long ago the claim was taken (zero without one).
    fn age_ms(&self) -> u64 {
        since(self.now_ms, self.claimed_at_ms.unwrap_or(self.now_ms))
    }

    fn ours_with_cancel(&self, token: i64) -> bool {
        self.state == State::Claimed && self.token == token && self.cancel_requested
    }
}

/// A fenced `move` of the row ([`crate::Store::op_move`]): which [`Move`],
/// under which token, and the values it writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct MoveStep {
    /// The move (its rule gives the from-state, to-state and cancel fence).
    #[serde(rename = "move")]
    pub to: Move,
    /// The claim's token.
    pub token: i64,
    /// The effect's reference, when the move writes one.
    pub external_ref: Option<String>,
    /// The result's JSON text, when the move writes one.
    pub result: Option<String>,
    /// The reason, when the move writes one.
    pub error: Option<String>,
    /// A release's backoff (`None`: due at once).
    pub retry_after_ms: Option<u64>,
}

impl MoveStep {
    /// The statement's parameters for `job_type:op_key`, built from the
    /// move's rule ([`Move::op`]).
    pub fn op<'a>(&'a self, job_type: &'a str, op_key: &'a str) -> OpMove<'a> {
        let mut p = self
            .to
            .op(job_type, op_key, self.token)
            .with_external_ref(self.external_ref.as_deref());
        if let Some(result) = &self.result {
            p = p.with_result(result);
        }
        if let Some(error) = &self.error {
            p = p.with_error(error);
        }
        if let Some(ms) = self.retry_after_ms {
            p = p.with_retry_after(Duration::from_millis(ms));
        }
        p
    }
}

/// An event to append to the audit trail, after the write it describes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct AuditStep {
    /// The event.
    pub event: AuditKind,
    /// The token the write named.
    pub token: i64,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// What happened, in words.
    pub detail: String,
    /// The claim's attempts (releases).
    pub attempt: Option<i64>,
    /// The release's backoff (releases; 0 for a claim given back unstarted).
    pub retry_after_ms: Option<u64>,
}

/// One thing for the interpreter to do, or the end of the delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Step {
    /// Run the claim statement for the delivery (job type, key,
    /// fingerprint, payload, owner, lease). Answer: [`ClaimAnswer`].
    Claim,
    /// Take over the stale claim read with `stale_token`, as the policy
    /// says (`settle`). Answer: [`Answer::TakeOver`].
    TakeOver {
        /// The policy's answer: the state the claim moves to.
        settle: Settle,
        /// The token of the stale claim as read.
        stale_token: i64,
        /// The reason written into the record.
        reason: String,
    },
    /// Read the row. Answer: [`Answer::Read`].
    Read,
    /// Run the fenced move. Answer: [`Answer::Moved`] (one row moved).
    Move(MoveStep),
    /// Append to the audit trail (a failed append is logged, never
    /// raised). Answer: [`Answer::None`].
    Audit(AuditStep),
    /// Call the fault hook. Answer: [`Answer::Fault`].
    Fault {
        /// Where.
        point: FaultPoint,
    },
    /// Read whether an operator asked to cancel (the flag heartbeats
    /// keep). Answer: [`Answer::CancelRequested`].
    CancelRequested,
    /// Call the effect (within the job timeout, heartbeats running).
    /// Answer: [`Answer::Perform`].
    Perform {
        /// 1 for the first try under this claim.
        #[serde(rename = "try")]
        try_: u32,
    },
    /// Look the effect up by its idempotency key. Answer: [`Answer::Lookup`].
    Lookup,
    /// Wait before trying again under the claim. Answer: [`Answer::Sleep`].
    Sleep {
        /// How long.
        ms: u64,
    },
    /// Withdraw the item at the destination. Answer: [`Answer::Withdraw`].
    Withdraw {
        /// The item.
        external_ref: String,
    },
    /// The delivery ends with this outcome.
    Finish {
        /// What became of it.
        outcome: Outcome,
    },
    /// The delivery ends with this error.
    Error {
        /// What went wrong.
        error: Failure,
    },
}

impl Step {
    /// True for [`Step::Finish`] and [`Step::Error`].
    pub fn is_end(&self) -> bool {
        matches!(self, Step::Finish { .. } | Step::Error { .. })
    }
}

/// What the claim statement found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimAnswer {
    /// The claim is ours.
    Claimed(Claimed),
    /// A row exists and was not claimed (settled, busy, not due, stale, or
    /// another payload's).
    Existing(StoredRow),
}

/// What the effect reported.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectAnswer {
    /// It happened.
    Done(Done),
    /// It surely did not happen.
    NotSent(String),
    /// It may have happened.
    Unknown(String),
    /// It failed for good.
    Failed(String),
    /// The job timeout ran out while it ran: it was stopped.
    TimedOut,
    /// A heartbeat could not renew the lease before it ran out (the
    /// database's error): the effect was stopped.
    LeaseUnrenewed(String),
    /// A heartbeat found the claim gone: the effect was stopped.
    ClaimLost,
    /// Stopped from outside (Celery's soft time limit: the exception's name).
    Interrupted(String),
    /// A local effect returned an error (its words), or an effect raised one.
    Raised(String),
}

/// A done effect: its reference and what repeats get back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Done {
    /// The reference at the destination.
    #[serde(default)]
    pub external_ref: Option<String>,
    /// The result.
    #[serde(default)]
    pub result: Value,
    /// Why the result could not be stored, when a client's effect returned
    /// one its JSON cannot hold (the completion writes this as its error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unstored: Option<String>,
}

/// What a lookup by idempotency key found.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupAnswer {
    /// The effect exists.
    Found {
        /// Its reference.
        external_ref: Option<String>,
        /// What repeats get back.
        result: Value,
    },
    /// It surely does not exist.
    NotFound,
    /// The lookup could not answer.
    Unavailable(String),
    /// Stopped from outside.
    Interrupted(String),
    /// The job timeout ran out.
    TimedOut,
    /// A heartbeat found the claim gone.
    ClaimLost,
    /// A heartbeat could not renew the lease.
    LeaseUnrenewed(String),
}

/// How a sleep between tries ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SleepAnswer {
    /// It slept.
    Slept,
    /// The job timeout ran out during it (nothing was sent meanwhile).
    TimedOut,
    /// A heartbeat found the claim gone.
    ClaimLost,
    /// A heartbeat could not renew the lease.
    LeaseUnrenewed(String),
}

/// What a withdraw at the destination did.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WithdrawAnswer {
    /// Gone (or never there).
    Withdrawn,
    /// It may still be there (why; "this effect cannot be withdrawn" when
    /// the effect has no withdraw).
    NotWithdrawn(String),
}

/// What the fault hook said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAnswer {
    /// Go on.
    Continue,
    /// Stop as a dead process would.
    Crash,
}

/// The answer to a step. Its JSON form is the inner value alone
/// (`true`, `null`, `{"claimed": ..}`); [`Answer::from_json`] reads it for
/// the step it answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// No answer: the first call of [`Decider::next`], and an audit append.
    None,
    /// To [`Step::Claim`].
    Claim(ClaimAnswer),
    /// To [`Step::TakeOver`]: the claim taken, or `None` (lost the race).
    TakeOver(Option<Claimed>),
    /// To [`Step::Read`]: the row, or `None` (no such row).
    Read(Option<StoredRow>),
    /// To [`Step::Move`]: one row moved.
    Moved(bool),
    /// To [`Step::Fault`].
    Fault(FaultAnswer),
    /// To [`Step::CancelRequested`].
    CancelRequested(bool),
    /// To [`Step::Perform`].
    Perform(EffectAnswer),
    /// To [`Step::Lookup`].
    Lookup(LookupAnswer),
    /// To [`Step::Sleep`].
    Sleep(SleepAnswer),
    /// To [`Step::Withdraw`].
    Withdraw(WithdrawAnswer),
}

impl Answer {
    /// Reads `value` as the answer to `step`.
    pub fn from_json(step: &Step, value: Value) -> serde_json::Result<Answer> {
        use serde_json::from_value as read;
        Ok(match step {
            Step::Claim => Answer::Claim(read(value)?),
            Step::TakeOver { .. } => Answer::TakeOver(read(value)?),
            Step::Read => Answer::Read(read(value)?),
            Step::Move(_) => Answer::Moved(read(value)?),
            Step::Fault { .. } => Answer::Fault(read(value)?),
            Step::CancelRequested => Answer::CancelRequested(read(value)?),
            Step::Perform { .. } => Answer::Perform(read(value)?),
            Step::Lookup => Answer::Lookup(read(value)?),
            Step::Sleep { .. } => Answer::Sleep(read(value)?),
            Step::Withdraw { .. } => Answer::Withdraw(read(value)?),
            Step::Audit(_) | Step::Finish { .. } | Step::Error { .. } => Answer::None,
        })
    }
}

/// What became of the delivery (the guard's [`crate::Outcome`], with its
/// times in milliseconds).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Completed: by this delivery, or by an earlier one (`repeat`).
    Done {
        /// What the completed run returned.
        result: Value,
        /// The effect's reference.
        external_ref: Option<String>,
        /// An earlier delivery did the effect.
        repeat: bool,
    },
    /// Another worker holds a live claim.
    InProgress {
        /// How long ago it was taken.
        age_ms: u64,
        /// How long it is live from when it was taken.
        lease_ms: u64,
        /// Who holds it.
        owner: Option<String>,
    },
    /// Held for a person.
    Held {
        /// Why.
        reason: Option<String>,
    },
    /// Failed for good.
    Failed {
        /// Why.
        error: Option<String>,
    },
    /// Cancelled; `withdrawn_ref` names an item withdrawn after the effect.
    Cancelled {
        /// The withdrawn item.
        withdrawn_ref: Option<String>,
    },
    /// Released: safe to deliver again, due after `retry_after_ms`.
    RetryLater {
        /// Why.
        reason: String,
        /// The backoff (0: due at once).
        retry_after_ms: u64,
    },
    /// Queued, not yet due.
    NotDue {
        /// When it is due.
        due_at_ms: Option<i64>,
    },
    /// A cancel came while the effect ran and the withdraw failed: completed.
    WithdrawFailed {
        /// The item still live.
        external_ref: Option<String>,
        /// What the withdraw said.
        error: String,
    },
}

/// How a delivery ends in error.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The claim was taken from this worker before it could record.
    LostClaim {
        /// The token this worker held.
        token: i64,
        /// The row as it now stands.
        row: StoredRow,
    },
    /// The key is stored with another payload.
    PayloadMismatch {
        /// The stored fingerprint.
        stored: String,
        /// The delivery's.
        offered: String,
    },
    /// No such row.
    NotFound {},
    /// The fault hook said crash.
    InjectedCrash {
        /// Where.
        point: FaultPoint,
    },
    /// A local effect returned an error: its transaction rolls back.
    LocalEffectFailed {
        /// What it said.
        why: String,
    },
    /// A local effect ran out of the job timeout.
    Timeout {
        /// The timeout.
        timeout_ms: u64,
    },
}

/// The guard's decisions for one delivery. See the module's documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Decider {
    job: Job,
    entry: Entry,
    answers: Vec<Answer>,
    asked: bool,
}

impl Decider {
    /// The machine for one delivery of `job` starting at `entry`.
    pub fn new(job: Job, entry: Entry) -> Self {
        Decider {
            job,
            entry,
            answers: Vec::new(),
            asked: false,
        }
    }

    /// The next step, given the answer to the last one ([`Answer::None`] on
    /// the first call, and to an audit append). After an end, returns the
    /// end again.
    ///
    /// # Panics
    ///
    /// When `answer` is not an answer to the last step returned (an
    /// interpreter's bug).
    pub fn next(&mut self, answer: Answer) -> Step {
        if self.asked {
            self.answers.push(answer);
        }
        let mut run = Run {
            job: self.job,
            answers: &self.answers,
            at: 0,
        };
        let step = match run.entry(&self.entry) {
            Ok(outcome) => Step::Finish { outcome },
            Err(Stop::Ask(step)) => {
                self.asked = true;
                return *step;
            }
            Err(Stop::End(step)) => *step,
        };
        // Ended: later calls give the same end without growing the answers.
        self.asked = false;
        step
    }

    /// The job.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The entry.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
}

/// How a not-sent outcome from an unanswered lookup begins.
pub const LOOKUP_UNAVAILABLE: &str = "lookup unavailable";

/// How long a released operation waits before it is due again, in ms:
/// 500ms after the first claim, doubling per claim, at most a minute, so a
/// destination that is down is not hammered by the relay.
pub fn retry_backoff_ms(attempt: i64) -> u64 {
    let doublings = attempt.saturating_sub(1).clamp(0, 7) as u32;
    (500u64 << doublings).min(60_000)
}

/// The first wait between tries under one claim (doubling after each).
pub const FIRST_SLEEP_MS: u64 = 20;

/// Why the machine stopped running: it needs an answer to a step, or the
/// delivery ended.
enum Stop {
    Ask(Box<Step>),
    End(Box<Step>),
}

type Flow<T> = Result<T, Stop>;

fn end<T>(error: Failure) -> Flow<T> {
    Err(Stop::End(Box::new(Step::Error { error })))
}

/// The effect's report, as the guard records it.
#[derive(Debug, Clone)]
enum Report {
    Done(Done),
    NotSent(String),
    Unknown(String),
    Failed(String),
}

/// What an existing row means for a delivery.
enum Seen {
    Settled(Outcome),
    Stale,
}

/// One run of the machine over the answers given so far.
struct Run<'a> {
    job: Job,
    answers: &'a [Answer],
    at: usize,
}

impl Run<'_> {
    fn entry(&mut self, entry: &Entry) -> Flow<Outcome> {
        match entry {
            Entry::Run { fingerprint } => self.run(fingerprint),
            Entry::RunClaimed { claim } => self.act(*claim, false),
            Entry::ReleaseUnstarted { claim, reason } => {
                self.release_or_cancel(*claim, reason, None, false)
            }
            Entry::Local { fingerprint } => self.local(fingerprint),
        }
    }

    // -- asking ---------------------------------------------------------------

    fn ask(&mut self, step: Step) -> Flow<Answer> {
        match self.answers.get(self.at) {
            Some(answer) => {
                self.at += 1;
                Ok(answer.clone())
            }
            None => Err(Stop::Ask(Box::new(step))),
        }
    }

    fn claim(&mut self) -> Flow<ClaimAnswer> {
        match self.ask(Step::Claim)? {
            Answer::Claim(a) => Ok(a),
            other => misanswered(Step::Claim, other),
        }
    }

    fn read(&mut self) -> Flow<Option<StoredRow>> {
        match self.ask(Step::Read)? {
            Answer::Read(a) => Ok(a),
            other => misanswered(Step::Read, other),
        }
    }

    fn moved(&mut self, step: MoveStep) -> Flow<bool> {
        match self.ask(Step::Move(step.clone()))? {
            Answer::Moved(a) => Ok(a),
            other => misanswered(Step::Move(step), other),
        }
    }

    fn audit(&mut self, step: AuditStep) -> Flow<()> {
        self.ask(Step::Audit(step)).map(drop)
    }

    fn fault(&mut self, point: FaultPoint) -> Flow<()> {
        match self.ask(Step::Fault { point })? {
            Answer::Fault(FaultAnswer::Continue) => Ok(()),
            Answer::Fault(FaultAnswer::Crash) => end(Failure::InjectedCrash { point }),
            other => misanswered(Step::Fault { point }, other),
        }
    }

    fn cancel_requested(&mut self) -> Flow<bool> {
        match self.ask(Step::CancelRequested)? {
            Answer::CancelRequested(a) => Ok(a),
            other => misanswered(Step::CancelRequested, other),
        }
    }

    fn perform(&mut self, try_: u32) -> Flow<EffectAnswer> {
        match self.ask(Step::Perform { try_ })? {
            Answer::Perform(a) => Ok(a),
            other => misanswered(Step::Perform { try_ }, other),
        }
    }

    fn lookup(&mut self) -> Flow<LookupAnswer> {
        match self.ask(Step::Lookup)? {
            Answer::Lookup(a) => Ok(a),
            other => misanswered(Step::Lookup, other),
        }
    }

    fn sleep(&mut self, ms: u64) -> Flow<SleepAnswer> {
        match self.ask(Step::Sleep { ms })? {
            Answer::Sleep(a) => Ok(a),
            other => misanswered(Step::Sleep { ms }, other),
        }
    }

    fn withdraw(&mut self, external_ref: &str) -> Flow<WithdrawAnswer> {
        let step = Step::Withdraw {
            external_ref: external_ref.to_owned(),
        };
        match self.ask(step.clone())? {
            Answer::Withdraw(a) => Ok(a),
            other => misanswered(step, other),
        }
    }

    fn take_over_step(&mut self, step: Step) -> Flow<Option<Claimed>> {
        match self.ask(step.clone())? {
            Answer::TakeOver(a) => Ok(a),
            other => misanswered(step, other),
        }
    }

    // -- a delivery -----------------------------------------------------------

    /// Claims, or decides from the row found; takes a stale claim over by
    /// the policy; then acts.
    fn run(&mut self, fingerprint: &str) -> Flow<Outcome> {
        let (claim, after_stale) = match self.claim()? {
            ClaimAnswer::Claimed(c) => (c, false),
            ClaimAnswer::Existing(row) => match self.existing(&row, fingerprint)? {
                Seen::Settled(outcome) => return Ok(outcome),
                Seen::Stale => match self.take_over(&row)? {
                    Some(c) => (c, true),
                    None => return self.settled_after_race(fingerprint),
                },
            },
        };
        self.act(claim, after_stale)
    }

    /// What an existing row means for a delivery carrying `fingerprint`.
    fn existing(&mut self, row: &StoredRow, fingerprint: &str) -> Flow<Seen> {
        if row.fingerprint != fingerprint {
            return end(Failure::PayloadMismatch {
                stored: row.fingerprint.clone(),
                offered: fingerprint.to_owned(),
            });
        }
        Ok(Seen::Settled(match row.state {
            State::Completed => Outcome::Done {
                result: row.result_value(),
                external_ref: row.external_ref.clone(),
                repeat: true,
            },
            State::Failed => Outcome::Failed {
                error: row.error.clone(),
            },
            State::Cancelled => Outcome::Cancelled {
                withdrawn_ref: None,
            },
            State::Held => Outcome::Held {
                reason: row.error.clone(),
            },
            State::Queued => Outcome::NotDue {
                due_at_ms: row.due_at_ms,
            },
            State::Claimed if row.lease_expired() => return Ok(Seen::Stale),
            State::Claimed => {
                let claimed_at = row.claimed_at_ms.unwrap_or(row.now_ms);
                Outcome::InProgress {
                    age_ms: row.age_ms(),
                    lease_ms: since(row.lease_until_ms.unwrap_or(row.now_ms), claimed_at),
                    owner: row.owner.clone(),
                }
            }
        }))
    }

    /// Takes over a stale claim as the policy says. `Some` when this worker
    /// now holds a claim and must act; `None` when another worker moved the
    /// row first, or the policy settled it (held or failed).
    fn take_over(&mut self, stale: &StoredRow) -> Flow<Option<Claimed>> {
        let owner = stale.owner.as_deref().unwrap_or("?");
        let settle = policy(self.job.effect, stale.attempts);
        let reason = match (settle, self.job.effect) {
            (Settle::Hold, EffectKind::Opaque(StalePolicy::AtLeastOnce)) => {
                "a redo under at-least-once also went past its lease; held to keep to one extra"
                    .to_owned()
            }
            (Settle::Hold, _) => format!(
                "claim by {owner} went past its lease; the effect may or may not have happened"
            ),
            (Settle::Fail, _) => {
                "claim went past its lease; given up under at-most-once (the effect may be missing)"
                    .to_owned()
            }
            (Settle::Redo, _) => format!("took over a claim of {owner} past its lease"),
        };
        let step = Step::TakeOver {
            settle,
            stale_token: stale.token,
            reason: reason.clone(),
        };
        let taken = self.take_over_step(step)?;
        if let Some(c) = taken {
            self.audit(AuditStep {
                event: AuditKind::TakeOver,
                token: c.token,
                from: State::Claimed,
                to: settle.to(),
                detail: format!("stale token {}: {reason}", stale.token),
                attempt: None,
                retry_after_ms: None,
            })?;
        }
        Ok(taken.filter(|_| settle == Settle::Redo))
    }

    /// After a lost take-over race or a settled take-over: the row as it stands.
    fn settled_after_race(&mut self, fingerprint: &str) -> Flow<Outcome> {
        let Some(row) = self.read()? else {
            return end(Failure::NotFound {});
        };
        match self.existing(&row, fingerprint)? {
            Seen::Settled(outcome) => Ok(outcome),
            // Still stale: someone else is taking it over right now.
            Seen::Stale => Ok(self.in_progress_stale(&row)),
        }
    }

    fn in_progress_stale(&self, row: &StoredRow) -> Outcome {
        Outcome::InProgress {
            age_ms: row.age_ms(),
            lease_ms: self.job.lease_ms,
            owner: row.owner.clone(),
        }
    }

    /// Acts under a claim this worker holds, then records the outcome.
    fn act(&mut self, claim: Claimed, after_stale: bool) -> Flow<Outcome> {
        self.fault(FaultPoint::AfterClaim)?;
        let report = self.attempts(claim, after_stale)?;
        let report = within_answer_rules(report);
        self.record(claim, report)
    }

    /// The effect, tried again under the claim where the kind allows it.
    /// From the first lookup or perform to the last, the interpreter keeps
    /// the job timeout and the heartbeats running.
    fn attempts(&mut self, claim: Claimed, after_stale: bool) -> Flow<Report> {
        let kind = self.job.effect;
        // A lookup effect looks first whenever an earlier claim may have acted.
        let mut look_first = kind == EffectKind::Lookup && (after_stale || claim.attempts > 1);
        let mut retries_left = self.job.max_retries;
        let mut sleep_ms = FIRST_SLEEP_MS;
        let mut try_ = 1;
        loop {
            if look_first {
                match self.lookup()? {
                    LookupAnswer::Found {
                        external_ref,
                        result,
                    } => {
                        return Ok(Report::Done(Done {
                            external_ref,
                            result,
                            unstored: None,
                        }))
                    }
                    LookupAnswer::NotFound => {}
                    LookupAnswer::Unavailable(why) => {
                        return Ok(Report::NotSent(format!("{LOOKUP_UNAVAILABLE}: {why}")))
                    }
                    LookupAnswer::Interrupted(why) => {
                        return Ok(Report::NotSent(format!(
                            "{LOOKUP_UNAVAILABLE}: {}",
                            stopped(&why)
                        )))
                    }
                    LookupAnswer::TimedOut => return Ok(Report::Unknown(self.timed_out())),
                    LookupAnswer::LeaseUnrenewed(e) => return Ok(Report::Unknown(unrenewed(&e))),
                    LookupAnswer::ClaimLost => return self.lost_claim(claim.token),
                }
            }
            if self.cancel_requested()? {
                return Ok(Report::Failed("cancel requested before the effect".into()));
            }
            let report = match self.perform(try_)? {
                EffectAnswer::Done(done) => Report::Done(done),
                EffectAnswer::NotSent(why) => Report::NotSent(why),
                EffectAnswer::Unknown(why) | EffectAnswer::Raised(why) => Report::Unknown(why),
                EffectAnswer::Failed(why) => Report::Failed(why),
                // The whole attempt was stopped: no try after it.
                EffectAnswer::TimedOut => return Ok(Report::Unknown(self.timed_out())),
                EffectAnswer::LeaseUnrenewed(e) => return Ok(Report::Unknown(unrenewed(&e))),
                EffectAnswer::Interrupted(why) => {
                    return Ok(Report::Unknown(format!("the effect {}", stopped(&why))))
                }
                EffectAnswer::ClaimLost => return self.lost_claim(claim.token),
            };
            let retry = match &report {
                Report::NotSent(_) => true,
                Report::Unknown(_) => matches!(kind, EffectKind::Keyed | EffectKind::Lookup),
                Report::Done(_) | Report::Failed(_) => false,
            };
            if !retry || retries_left == 0 {
                if matches!(report, Report::Done(_)) {
                    self.fault(FaultPoint::AfterEffect)?;
                }
                return Ok(report);
            }
            retries_left -= 1;
            look_first = kind == EffectKind::Lookup;
            match self.sleep(sleep_ms)? {
                SleepAnswer::Slept => {}
                // Nothing was sent during the sleep: the last report stands.
                SleepAnswer::TimedOut => return Ok(report),
                SleepAnswer::LeaseUnrenewed(e) => return Ok(Report::Unknown(unrenewed(&e))),
                SleepAnswer::ClaimLost => return self.lost_claim(claim.token),
            }
            sleep_ms *= 2;
            try_ += 1;
        }
    }

    fn timed_out(&self) -> String {
        format!(
            "timed out after {} (the job timeout: the whole attempt, every request in it); the effect was stopped",
            humantime::format_duration(Duration::from_millis(self.job.timeout_ms))
        )
    }

    /// Writes what the effect reported, under the claim's token.
    fn record(&mut self, claim: Claimed, report: Report) -> Flow<Outcome> {
        match report {
            Report::Done(done) => {
                let text = done.result.to_string();
                let complete = MoveStep {
                    to: Move::Complete,
                    token: claim.token,
                    external_ref: done.external_ref.clone(),
                    result: Some(text.clone()),
                    error: done.unstored.clone(),
                    retry_after_ms: None,
                };
                if self.moved(complete)? {
                    return Ok(Outcome::Done {
                        result: done.result,
                        external_ref: done.external_ref,
                        repeat: false,
                    });
                }
                self.completion_refused(claim, done, text)
            }
            Report::NotSent(reason) => {
                let backoff = retry_backoff_ms(claim.attempts);
                let looked_up = self.looked_up(claim, &reason);
                self.release_or_cancel(claim, &reason, Some(backoff), looked_up)
            }
            Report::Failed(error) => {
                if self.cancel_requested()? {
                    let looked_up = self.looked_up(claim, &error);
                    return self.cancel_unsent(claim, &error, looked_up);
                }
                self.fenced(claim, Move::Fail, &error)?;
                Ok(Outcome::Failed { error: Some(error) })
            }
            Report::Unknown(reason) => self.unknown(claim, reason),
        }
    }

    /// An unknown outcome that retries under the claim did not clear: the
    /// policy decides, as for a claim past its lease.
    fn unknown(&mut self, claim: Claimed, reason: String) -> Flow<Outcome> {
        let to = policy(self.job.effect, claim.attempts).owner_move();
        if to != Move::Release {
            self.fenced(claim, to, &reason)?;
            return Ok(match to {
                Move::Fail => Outcome::Failed {
                    error: Some(reason),
                },
                _ => Outcome::Held {
                    reason: Some(reason),
                },
            });
        }
        let backoff = retry_backoff_ms(claim.attempts);
        if self.release(claim, &reason, Some(backoff))? {
            return Ok(Outcome::RetryLater {
                reason,
                retry_after_ms: backoff,
            });
        }
        // An operator asked to cancel, but the effect may exist and there is
        // no reference to withdraw: a person must look, the request kept.
        let note = format!(
            "cancel requested, but the effect's outcome is unknown ({reason}); check the destination"
        );
        self.fenced(claim, Move::Hold, &note)?;
        Ok(Outcome::Held { reason: Some(note) })
    }

    /// Releases a claim whose effect surely did not happen, due again after
    /// `backoff` (`None`: at once, a claim given back unstarted); when an
    /// operator asked to cancel it, cancels it instead, or holds it when an
    /// earlier claim may have acted ([`cancel_unsent`]).
    fn release_or_cancel(
        &mut self,
        claim: Claimed,
        reason: &str,
        backoff: Option<u64>,
        looked_up: bool,
    ) -> Flow<Outcome> {
        if self.release(claim, reason, backoff)? {
            return Ok(Outcome::RetryLater {
                reason: reason.to_owned(),
                retry_after_ms: backoff.unwrap_or(0),
            });
        }
        let note = format!("cancel requested; the effect was not sent ({reason})");
        self.cancel_unsent(claim, &note, looked_up)
    }

    /// Whether a lookup under this claim found nothing before `reason` (a
    /// lookup effect looks first on every claim after the first).
    fn looked_up(&self, claim: Claimed, reason: &str) -> bool {
        self.job.effect == EffectKind::Lookup
            && claim.attempts > 1
            && !reason.starts_with(LOOKUP_UNAVAILABLE)
    }

    /// A cancel was requested and this claim did not act: cancelled, or,
    /// when an earlier claim may have acted, held for a person.
    fn cancel_unsent(&mut self, claim: Claimed, note: &str, looked_up: bool) -> Flow<Outcome> {
        if cancel_unsent(claim.attempts, looked_up) == Move::CancelClaimed {
            self.fenced(claim, Move::CancelClaimed, note)?;
            return Ok(Outcome::Cancelled {
                withdrawn_ref: None,
            });
        }
        let note = format!(
            "{note}; an earlier claim of this operation may have acted: check the destination"
        );
        self.fenced(claim, Move::Hold, &note)?;
        Ok(Outcome::Held { reason: Some(note) })
    }

    /// Releases the claim to queued unless an operator asked to cancel it:
    /// `true` released; `false` a cancel is pending and the claim is still
    /// ours; a lost claim ends the delivery.
    fn release(&mut self, claim: Claimed, reason: &str, backoff: Option<u64>) -> Flow<bool> {
        let release = MoveStep {
            to: Move::Release,
            token: claim.token,
            external_ref: None,
            result: None,
            error: Some(reason.to_owned()),
            retry_after_ms: backoff,
        };
        if self.moved(release)? {
            // A failed try has a backoff; a claim given back unstarted is due at once.
            let event = match backoff {
                Some(_) => AuditKind::Retry,
                None => AuditKind::Released,
            };
            self.audit(AuditStep {
                event,
                token: claim.token,
                from: State::Claimed,
                to: State::Queued,
                detail: reason.to_owned(),
                attempt: Some(claim.attempts),
                retry_after_ms: Some(backoff.unwrap_or(0)),
            })?;
            return Ok(true);
        }
        match self.read()? {
            None => end(Failure::NotFound {}),
            Some(row) if row.ours_with_cancel(claim.token) => Ok(false),
            Some(row) => self.lost(claim.token, row),
        }
    }

    /// Takes the owner's move `to` (fail, hold or cancel), or ends in a lost claim.
    fn fenced(&mut self, claim: Claimed, to: Move, reason: &str) -> Flow<()> {
        let step = MoveStep {
            to,
            token: claim.token,
            external_ref: None,
            result: None,
            error: Some(reason.to_owned()),
            retry_after_ms: None,
        };
        if !self.moved(step)? {
            return self.lost_claim(claim.token);
        }
        let event = match to {
            Move::Hold => AuditKind::Hold,
            Move::CancelClaimed => AuditKind::Cancelled,
            _ => AuditKind::Failed,
        };
        self.audit(AuditStep {
            event,
            token: claim.token,
            from: to.from(),
            to: to.to(),
            detail: reason.to_owned(),
            attempt: None,
            retry_after_ms: None,
        })
    }

    /// The completion changed nothing: either an operator asked to cancel
    /// while the effect ran (withdraw it), or the claim is gone.
    fn completion_refused(&mut self, claim: Claimed, done: Done, text: String) -> Flow<Outcome> {
        let Some(row) = self.read()? else {
            return end(Failure::NotFound {});
        };
        if !row.ours_with_cancel(claim.token) {
            return self.lost(claim.token, row);
        }
        let withdrawn = match done.external_ref.as_deref() {
            Some(external_ref) => self.withdraw(external_ref)?,
            None => {
                WithdrawAnswer::NotWithdrawn("the effect returned no reference to withdraw".into())
            }
        };
        let (to, outcome, note, event) = match withdrawn {
            WithdrawAnswer::Withdrawn => (
                Move::CancelClaimed,
                Outcome::Cancelled {
                    withdrawn_ref: done.external_ref.clone(),
                },
                "cancel requested while the effect ran; withdrawn at the destination".to_owned(),
                AuditKind::Compensated,
            ),
            WithdrawAnswer::NotWithdrawn(error) => (
                Move::CompleteWithdrawFailed,
                Outcome::WithdrawFailed {
                    external_ref: done.external_ref.clone(),
                    error: error.clone(),
                },
                format!(
                    "cancel requested while the effect ran, but the withdraw failed ({error}); the item is live at the destination"
                ),
                AuditKind::WithdrawFailed,
            ),
        };
        let step = MoveStep {
            to,
            token: claim.token,
            external_ref: done.external_ref,
            result: Some(text),
            error: Some(note.clone()),
            retry_after_ms: None,
        };
        if !self.moved(step)? {
            return self.lost_claim(claim.token);
        }
        self.audit(AuditStep {
            event,
            token: claim.token,
            from: to.from(),
            to: to.to(),
            detail: note,
            attempt: None,
            retry_after_ms: None,
        })?;
        Ok(outcome)
    }

    /// Reads the row and ends in a lost claim (or not found).
    fn lost_claim<T>(&mut self, token: i64) -> Flow<T> {
        match self.read()? {
            Some(row) => self.lost(token, row),
            None => end(Failure::NotFound {}),
        }
    }

    /// Ends in a lost claim for the `token` this worker held, with the row
    /// as it now stands, appended to the audit trail.
    fn lost<T>(&mut self, token: i64, row: StoredRow) -> Flow<T> {
        self.audit(AuditStep {
            event: AuditKind::LostClaim,
            token,
            from: State::Claimed,
            to: row.state,
            detail: format!(
                "the row is now {} with token {} (owner {})",
                row.state,
                row.token,
                row.owner.as_deref().unwrap_or("-")
            ),
            attempt: None,
            retry_after_ms: None,
        })?;
        end(Failure::LostClaim { token, row })
    }

    // -- a local effect ---------------------------------------------------------

    /// Claim, effect and completion inside the caller's transaction. A
    /// refused completion ends in a lost claim without an audit append (the
    /// transaction rolls back, and on SQLite the append would wait on the
    /// connection it holds).
    fn local(&mut self, fingerprint: &str) -> Flow<Outcome> {
        let claim = match self.claim()? {
            ClaimAnswer::Claimed(c) => c,
            ClaimAnswer::Existing(row) => {
                return match self.existing(&row, fingerprint)? {
                    Seen::Settled(outcome) => Ok(outcome),
                    // A local claim only outlives its transaction if someone
                    // mixed effect kinds on one job type; a person must look.
                    Seen::Stale => Ok(self.in_progress_stale(&row)),
                };
            }
        };
        self.fault(FaultPoint::AfterClaim)?;
        let result = match self.perform(1)? {
            EffectAnswer::Done(done) => done.result,
            EffectAnswer::TimedOut => {
                return end(Failure::Timeout {
                    timeout_ms: self.job.timeout_ms,
                })
            }
            EffectAnswer::Raised(why)
            | EffectAnswer::NotSent(why)
            | EffectAnswer::Unknown(why)
            | EffectAnswer::Failed(why)
            | EffectAnswer::Interrupted(why)
            | EffectAnswer::LeaseUnrenewed(why) => return end(Failure::LocalEffectFailed { why }),
            EffectAnswer::ClaimLost => {
                return end(Failure::LocalEffectFailed {
                    why: "the claim was lost".into(),
                })
            }
        };
        self.fault(FaultPoint::AfterEffect)?;
        let complete = MoveStep {
            to: Move::Complete,
            token: claim.token,
            external_ref: None,
            result: Some(result.to_string()),
            error: None,
            retry_after_ms: None,
        };
        if self.moved(complete)? {
            return Ok(Outcome::Done {
                result,
                external_ref: None,
                repeat: false,
            });
        }
        match self.read()? {
            Some(row) => end(Failure::LostClaim {
                token: claim.token,
                row,
            }),
            None => end(Failure::NotFound {}),
        }
    }
}

/// A done report whose reference or result breaks the answer rules
/// (`crate::answer`) broke the protocol, as a 2xx without an id does:
/// failed for good, with the rule named, and nothing of the answer stored.
fn within_answer_rules(report: Report) -> Report {
    let Report::Done(done) = &report else {
        return report;
    };
    let broken = done
        .external_ref
        .as_deref()
        .map_or(Ok(()), crate::answer::check_reference)
        .and_then(|()| crate::answer::check_result(&done.result.to_string()));
    match broken {
        Ok(()) => report,
        Err(e) => Report::Failed(e.to_string()),
    }
}

fn unrenewed(e: &str) -> String {
    format!("the lease could not be renewed ({e}); the effect was stopped before it ran out")
}

fn stopped(why: &str) -> String {
    format!("was stopped at the time limit ({why})")
}

fn misanswered<T>(step: Step, answer: Answer) -> T {
    panic!("{answer:?} does not answer {step:?}")
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn since(later: i64, earlier: i64) -> u64 {
    u64::try_from(later.saturating_sub(earlier)).unwrap_or(0)
}
