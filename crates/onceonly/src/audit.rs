//! The audit trail: one appended row per exceptional transition (take-over,
//! hold, lost claim, cancel, compensation, resolve, permanent failure) and
//! per release of a claim (a retry, or a claim given back unstarted), with
//! who did it, under which token, and when by the database's clock.
//!
//! A row is written only after the fenced write that decided the transition
//! succeeded; it records what happened and never decides anything. The happy
//! path (claim, complete) writes none.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::Error;
use crate::record::{DbTime, State};

/// What an audit event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditKind {
    /// A claim past its lease was taken over (to claimed, held or failed, as
    /// the policy says).
    TakeOver,
    /// The owner put its own claim on hold (the effect's outcome is
    /// unknown), or an operator's cancel held a queued row it could not
    /// look up at the destination.
    Hold,
    /// A worker found its claim gone when it came to write.
    LostClaim,
    /// An operator asked to cancel a live claim.
    CancelRequested,
    /// Cancelled: by an operator, or by the owner after a cancel request.
    Cancelled,
    /// Cancel requested while the effect ran; the effect was withdrawn.
    Compensated,
    /// Cancel requested while the effect ran; the withdraw failed, so the
    /// operation stays completed.
    WithdrawFailed,
    /// A person resolved a held operation.
    Resolved,
    /// The operation failed for good.
    Failed,
    /// The owner's try did not do the effect (not sent, or an outcome safe
    /// to redo): the claim was released to queued, due again after a
    /// backoff. Carries the attempt and the backoff.
    Retry,
    /// A claim was given back before its effect started (a relay stopping):
    /// released to queued, due at once. No try failed.
    Released,
    /// An operator purged finished records younger than the redelivery
    /// horizon (`purge --force`): the detail names the horizon overridden
    /// and how many records went. Stored under the job type purged (`*`:
    /// every job type) with the empty key, which no operation has.
    Purged,
}

impl AuditKind {
    /// Every kind.
    pub const ALL: [AuditKind; 12] = [
        AuditKind::TakeOver,
        AuditKind::Hold,
        AuditKind::LostClaim,
        AuditKind::CancelRequested,
        AuditKind::Cancelled,
        AuditKind::Compensated,
        AuditKind::WithdrawFailed,
        AuditKind::Resolved,
        AuditKind::Failed,
        AuditKind::Retry,
        AuditKind::Released,
        AuditKind::Purged,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::TakeOver => "take_over",
            AuditKind::Hold => "hold",
            AuditKind::LostClaim => "lost_claim",
            AuditKind::CancelRequested => "cancel_requested",
            AuditKind::Cancelled => "cancelled",
            AuditKind::Compensated => "compensated",
            AuditKind::WithdrawFailed => "withdraw_failed",
            AuditKind::Resolved => "resolved",
            AuditKind::Failed => "failed",
            AuditKind::Retry => "retry",
            AuditKind::Released => "released",
            AuditKind::Purged => "purged",
        }
    }

    /// Whether the event follows a write that changed nothing (the claim was
    /// gone) rather than one that succeeded.
    pub fn on_refusal(self) -> bool {
        self == AuditKind::LostClaim
    }

    /// Whether the event carries the claim's attempt and, for a retry, the
    /// backoff (`attempt`, `retry_after_ms`).
    pub fn carries_attempt(self) -> bool {
        matches!(self, AuditKind::Retry | AuditKind::Released)
    }
}

impl fmt::Display for AuditKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AuditKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        AuditKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| Error::Invalid(format!("unknown audit event {s:?}")))
    }
}

/// One row of the audit trail, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEvent {
    /// Increasing with every append: the order of events.
    pub id: i64,
    /// Job type.
    #[serde(rename = "job")]
    pub job_type: String,
    /// Operation key.
    #[serde(rename = "key")]
    pub op_key: String,
    /// When, by the database's clock (with the store's offset).
    pub at: DbTime,
    /// What happened.
    pub event: AuditKind,
    /// Who: a worker's owner name, or the person or tool acting.
    pub actor: String,
    /// The token the transition was made under (for a take-over, the new one).
    pub token: i64,
    /// The state before, as the actor saw it.
    pub from_state: Option<State>,
    /// The state after (for a lost claim, the row's state as it now stands).
    pub to_state: Option<State>,
    /// Why, in words.
    pub detail: Option<String>,
    /// For a release ([`AuditKind::Retry`], [`AuditKind::Released`]): the
    /// claim's attempt number (its `attempts` when it was taken).
    pub attempt: Option<i64>,
    /// For a release: how long after `at` the operation is due again, in ms.
    pub retry_after_ms: Option<i64>,
}

impl AuditEvent {
    /// For a release: when the operation is due again, by the database's
    /// clock: `at` plus the backoff (the release itself ran a moment before
    /// `at`, so the row is due by then).
    pub fn due_again(&self) -> Option<DbTime> {
        self.retry_after_ms.map(|ms| DbTime(self.at.0 + ms))
    }

    /// The detail in words, and for a release which attempt it ended and
    /// when the operation is due again, as `history` and the console show it.
    pub fn described(&self) -> String {
        let words = self.detail.as_deref().unwrap_or("");
        match (self.attempt, self.due_again()) {
            (Some(attempt), Some(due)) => {
                format!("attempt {attempt}: {words} (due again at {due})")
            }
            (Some(attempt), None) => format!("attempt {attempt}: {words}"),
            _ => words.to_owned(),
        }
    }
}
