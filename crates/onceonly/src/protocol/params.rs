//! The parameters of the statements the protocol builds: a fenced move
//! ([`super::Move::op`]) and a take-over ([`super::Settle::take_over`]).
//! The stores run them ([`crate::Store::op_move`],
//! [`crate::Store::op_take_over`]); `onceonly::store` re-exports them.

use std::time::Duration;

use crate::record::State;

/// Parameters of [`Store::op_take_over`](crate::Store::op_take_over): move a claim whose lease is over to
/// a new token, in the state the policy chose.
#[derive(Debug, Clone)]
pub struct OpTakeOver<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// The stale claim's token, as read.
    pub stale_token: i64,
    /// `Claimed` (redo), `Held` or `Failed`.
    pub to: State,
    /// The new owner.
    pub owner: &'a str,
    /// Lease of the new claim.
    pub lease: Duration,
    /// Why, stored in `error`.
    pub reason: &'a str,
}

/// Parameters of [`Store::op_move`](crate::Store::op_move): one fenced transition.
///
/// Changes the row only if it is in `from` with `token`; fields left `None`
/// keep their stored value.
#[derive(Debug, Clone)]
pub struct OpMove<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// The token the writer holds or read.
    pub token: i64,
    /// The state the row must be in.
    pub from: State,
    /// The state to move to.
    pub to: State,
    /// Refuse when an operator requested a cancel (completions).
    pub unless_cancel_requested: bool,
    /// External reference to record.
    pub external_ref: Option<&'a str>,
    /// Result JSON to record.
    pub result: Option<&'a str>,
    /// Error or reason to record.
    pub error: Option<&'a str>,
    /// Moving to queued: not claimable before now + this (a retry's backoff).
    pub retry_after: Option<Duration>,
}

impl<'a> OpMove<'a> {
    /// A move with no fields to set. Library code builds moves from the
    /// protocol's definition instead ([`Move::op`](super::Move::op)), which sets the
    /// from-state, to-state and cancel fence together; this is for tests
    /// and harnesses that must write what the protocol would not.
    pub fn new(job_type: &'a str, op_key: &'a str, token: i64, from: State, to: State) -> Self {
        Self {
            job_type,
            op_key,
            token,
            from,
            to,
            unless_cancel_requested: false,
            external_ref: None,
            result: None,
            error: None,
            retry_after: None,
        }
    }

    /// Records the effect's reference at the destination (when `Some`).
    pub fn with_external_ref(mut self, external_ref: Option<&'a str>) -> Self {
        self.external_ref = external_ref;
        self
    }

    /// Records the result JSON.
    pub fn with_result(mut self, result: &'a str) -> Self {
        self.result = Some(result);
        self
    }

    /// Records the error or reason.
    pub fn with_error(mut self, error: &'a str) -> Self {
        self.error = Some(error);
        self
    }

    /// Moving to queued: not claimable before now + `delay`.
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }
}
