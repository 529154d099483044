//! The audit trail: one appended row per exceptional transition (take-over,
//! hold, lost claim, cancel, compensation, resolve, permanent failure), with
//! who did it, under which token, and when by the database's clock.
//!
//! A row is written only after the fenced write that decided the transition
//! succeeded; it records what happened and never decides anything. The happy
//! path (claim, complete, release for a retry) writes none.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use tracing::warn;

use crate::error::Error;
use crate::record::{DbTime, State};
use crate::store::{OpAudit, Store};

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
}

impl AuditKind {
    /// Every kind.
    pub const ALL: [AuditKind; 9] = [
        AuditKind::TakeOver,
        AuditKind::Hold,
        AuditKind::LostClaim,
        AuditKind::CancelRequested,
        AuditKind::Cancelled,
        AuditKind::Compensated,
        AuditKind::WithdrawFailed,
        AuditKind::Resolved,
        AuditKind::Failed,
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
        }
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
}

/// Appends an event; a failed append is logged and otherwise ignored, so it
/// never turns a transition that happened into an error.
pub(crate) async fn append<S: Store>(store: &S, p: &OpAudit<'_>) {
    if let Err(e) = store.op_audit(p).await {
        warn!(job = p.job_type, key = p.op_key, event = %p.event, token = p.token, error = %e, "audit append failed; the transition itself stands");
    }
}
