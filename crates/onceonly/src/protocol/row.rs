//! The record as the protocol sees it, and each transition applied to it:
//! the meaning every store's SQL must have (the conformance suite checks
//! it) and the model checker explores.

use super::{CancelFence, LeaseFence, Rule, TokenFence, TokenWrite, Transition, Write};
use crate::record::State;

/// The columns that decide who may act, with the effect's reference as a
/// number (the model's destination items; the conformance suite's
/// `ref-N`). Times are reduced to whether the lease is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Row {
    /// Where the operation stands.
    pub state: State,
    /// The fencing token.
    pub token: i64,
    /// Claims taken.
    pub attempts: i64,
    /// An operator asked to cancel the live claim.
    pub cancel_requested: bool,
    /// A lease is set and not over.
    pub lease_live: bool,
    /// The effect's reference at the destination.
    pub external_ref: Option<u32>,
}

/// What the caller of a transition names and gives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Args {
    /// The token held or read (ignored by transitions without a token fence).
    pub token: i64,
    /// The reference to record, for transitions that write one.
    pub external_ref: Option<u32>,
}

impl Transition {
    /// Whether `row` (`None`: no record) meets the transition's fences for
    /// a caller naming `token`.
    pub fn allows(self, row: Option<&Row>, token: i64) -> bool {
        self.rule().allows(row, token)
    }

    /// The row after the transition, or `None` when its fences refuse it
    /// (the statement changes no row: 0 affected, the caller re-reads).
    pub fn apply(self, row: Option<&Row>, args: Args) -> Option<Row> {
        self.rule().apply(row, args)
    }
}

impl Rule {
    /// Whether `row` (`None`: no record) meets this rule's fences for a
    /// caller naming `token`.
    pub fn allows(&self, row: Option<&Row>, token: i64) -> bool {
        let Some(row) = row else {
            return self.from.is_none();
        };
        self.from == Some(row.state)
            && (self.token == TokenFence::None || row.token == token)
            && (self.cancel == CancelFence::Any || !row.cancel_requested)
            && (self.lease == LeaseFence::Any || !row.lease_live)
    }

    /// The row after a transition by this rule, or `None` when its fences
    /// refuse it. (A rule is applied directly only to check a changed one:
    /// the model checker plants a bug this way.)
    pub fn apply(&self, row: Option<&Row>, args: Args) -> Option<Row> {
        if !self.allows(row, args.token) {
            return None;
        }
        let mut next = row.copied().unwrap_or(Row {
            state: self.to,
            token: 0,
            attempts: 0,
            cancel_requested: false,
            lease_live: false,
            external_ref: None,
        });
        next.state = self.to;
        next.token = match self.token_write {
            TokenWrite::Keep => next.token,
            TokenWrite::Zero => 0,
            TokenWrite::One => 1,
            TokenWrite::Next => next.token + 1,
        };
        for write in self.writes {
            match write {
                Write::Attempts => next.attempts += 1,
                Write::LeaseUntil => next.lease_live = true,
                Write::LeaseCleared => next.lease_live = false,
                Write::ExternalRef => {
                    if args.external_ref.is_some() {
                        next.external_ref = args.external_ref;
                    }
                }
                Write::CancelRequested => next.cancel_requested = true,
                Write::CancelRequestedCleared => next.cancel_requested = false,
                Write::Payload
                | Write::Owner
                | Write::ClaimedAt
                | Write::DueAt
                | Write::Result
                | Write::Error
                | Write::CompletedAt => {}
            }
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Move, Settle};

    fn claimed() -> Row {
        Transition::Claim.apply(None, Args::default()).unwrap()
    }

    #[test]
    fn a_claim_is_fenced_by_its_token() {
        let row = claimed();
        assert_eq!(
            (row.state, row.token, row.lease_live),
            (State::Claimed, 1, true)
        );
        let stale = Args {
            token: 0,
            external_ref: Some(1),
        };
        assert_eq!(
            Transition::Move(Move::Complete).apply(Some(&row), stale),
            None
        );
        let done = Transition::Move(Move::Complete)
            .apply(
                Some(&row),
                Args {
                    token: 1,
                    external_ref: Some(1),
                },
            )
            .unwrap();
        assert_eq!(
            (done.state, done.external_ref, done.lease_live),
            (State::Completed, Some(1), false)
        );
    }

    #[test]
    fn a_cancel_request_refuses_complete_and_release() {
        let asked = Transition::RequestCancel
            .apply(
                Some(&claimed()),
                Args {
                    token: 1,
                    external_ref: None,
                },
            )
            .unwrap();
        for m in [Move::Complete, Move::Release] {
            assert_eq!(
                Transition::Move(m).apply(
                    Some(&asked),
                    Args {
                        token: 1,
                        external_ref: None
                    }
                ),
                None
            );
        }
        let cancelled = Transition::Move(Move::CancelClaimed)
            .apply(
                Some(&asked),
                Args {
                    token: 1,
                    external_ref: None,
                },
            )
            .unwrap();
        assert_eq!(cancelled.state, State::Cancelled);
    }

    #[test]
    fn a_take_over_needs_the_lease_over_and_bumps_the_token() {
        let mut row = claimed();
        let redo = Transition::TakeOver(Settle::Redo);
        assert_eq!(
            redo.apply(
                Some(&row),
                Args {
                    token: 1,
                    external_ref: None
                }
            ),
            None
        );
        row.lease_live = false;
        let taken = redo
            .apply(
                Some(&row),
                Args {
                    token: 1,
                    external_ref: None,
                },
            )
            .unwrap();
        assert_eq!(
            (taken.token, taken.attempts, taken.lease_live),
            (2, 2, true)
        );
    }
}
