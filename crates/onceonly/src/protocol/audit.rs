//! Which transitions each audit event follows: the protocol's part of the
//! audit trail ([`crate::AuditKind`] itself is in `crate::audit`, below the
//! protocol, so that the stores and the protocol can both name it).

use super::{Move, Settle, Transition};
use crate::audit::AuditKind;

impl AuditKind {
    /// The transitions after which the event is appended: after one of them
    /// succeeded, or, for [`AuditKind::LostClaim`], after one of them
    /// changed nothing because the claim was gone.
    pub fn after(self) -> &'static [Transition] {
        use Move::*;
        match self {
            AuditKind::TakeOver => &[
                Transition::TakeOver(Settle::Redo),
                Transition::TakeOver(Settle::Hold),
                Transition::TakeOver(Settle::Fail),
            ],
            AuditKind::Hold => &[Transition::Move(Hold), Transition::Move(HoldQueued)],
            AuditKind::LostClaim => &[
                Transition::Heartbeat,
                Transition::Move(Complete),
                Transition::Move(Release),
                Transition::Move(Fail),
                Transition::Move(Hold),
                Transition::Move(CancelClaimed),
                Transition::Move(CompleteWithdrawFailed),
            ],
            AuditKind::CancelRequested => &[Transition::RequestCancel],
            AuditKind::Cancelled => &[
                Transition::Move(CancelClaimed),
                Transition::Move(CancelQueued),
                Transition::Move(CancelFailed),
                Transition::Move(CancelCompleted),
            ],
            AuditKind::Compensated => &[Transition::Move(CancelClaimed)],
            AuditKind::WithdrawFailed => &[Transition::Move(CompleteWithdrawFailed)],
            AuditKind::Resolved => &[
                Transition::Move(ResolveCompleted),
                Transition::Move(ResolveQueued),
                Transition::Move(ResolveFailed),
                Transition::Move(ResolveCancelled),
            ],
            AuditKind::Failed => &[Transition::Move(Fail)],
            AuditKind::Retry | AuditKind::Released => &[Transition::Move(Release)],
            // An operator's deletion, not a transition of one record.
            AuditKind::Purged => &[],
        }
    }
}
