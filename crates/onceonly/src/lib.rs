//! onceonly makes a background job's side effect happen once per business
//! operation, although every real queue delivers at least once.
//!
//! A [`Guard`] claims the operation record with one conditional statement
//! (the database's unique constraint on job type and operation key decides
//! who may act), runs the effect, and records the outcome only while the
//! claim's fencing token is still its own. What "once" means depends on the
//! [`EffectKind`]: exactly once for a local write, once at the destination
//! for keyed and lookup effects, and what the [`StalePolicy`] states for
//! opaque ones.
//!
//! ```no_run
//! # async fn demo<S: onceonly::Store>(store: S) -> onceonly::Result<()> {
//! use onceonly::{EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Payload, StalePolicy};
//!
//! let spec = JobSpec::new("send_receipt", EffectKind::Opaque(StalePolicy::Hold));
//! let guard = Guard::new(store, spec)?;
//! let payload = Payload::parse(r#"{"order": 42}"#)?;
//! let send = EffectFn(|ctx: onceonly::EffectCtx| async move {
//!     // call the mail provider here, passing ctx.idempotency_key where it takes one
//!     EffectOutcome::done_with_ref(format!("mail-{}", ctx.op_key))
//! });
//! let outcome = guard.run("order-42", &payload, &send).await?;
//! println!("{outcome:?}");
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

pub mod answer;
mod audit;
pub mod columns;
pub mod db_url;
mod effect;
mod error;
pub mod fault;
mod guard;
pub mod json_keys;
mod key;
pub mod operator;
pub mod ops;
mod owner;
pub mod protocol;
mod record;
pub mod relay;
mod spec;
pub mod store;

pub use answer::{escape_controls, AnswerError};
pub use audit::{AuditEvent, AuditKind};
pub use effect::{Effect, EffectCtx, EffectFn, EffectOutcome, LookupOutcome, WithdrawOutcome};
pub use error::{BoxError, DbError, DbErrorKind, Error, Result};
pub use fault::{FaultAction, FaultHook, FaultPoint};
pub use guard::{Attempt, DoneAttempt, Guard, LocalClaim, LocalStart, Outcome};
pub use key::{
    idempotency_key, validate_job_type, validate_op_key, Payload, MAX_JOB_TYPE_BYTES, MAX_KEY_BYTES,
};
pub use owner::new_owner;
pub use protocol::{Move, Settle, Transition};
pub use record::{DbTime, Record, Snapshot, State, UnknownState};
pub use spec::{parse_duration, timing_lines, EffectKind, JobSpec, StalePolicy};
pub use store::{ClockOffset, Store};
