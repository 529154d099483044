//! The protocol's transitions, defined once.
//!
//! Every change of an operation record is one of the named [`Transition`]s.
//! Each has a [`Rule`]: who takes it, the state it moves from and to, the
//! fences the database checks (token, cancel request, lease) and the
//! columns it writes. The guard, the relay, the operator's operations and
//! both stores build their statements' parameters from these rules
//! ([`Move::op`], [`Settle::take_over`]); the model checker
//! (`onceonly-model`) runs [`Transition::apply`] on an abstract [`Row`];
//! the conformance suite checks each store's SQL against the same
//! [`Transition::apply`]; and `protocol/transitions.json` is this table for
//! the Python and Ruby clients (a test keeps it equal to [`table`]).
//!
//! docs/DESIGN.md section 2 explains the table; `docs/protocol.md` walks
//! through it.

mod audit;
mod params;
mod policy;
mod row;

use serde::Serialize;

use crate::record::State;
pub use params::{OpMove, OpTakeOver};
pub use policy::{
    cancel_unsent, policy, policy_table, unclaimed_may_have_acted, PolicyRow, Settle,
};
pub use row::{Args, Row};

/// Who takes a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// Whoever records the operation for later (an outbox write, `enqueue`).
    Producer,
    /// Any worker delivering the operation (claims, take-overs).
    Worker,
    /// The worker holding the claim, naming its token.
    Owner,
    /// An operator or a person, naming the token they read.
    Operator,
}

/// Which token the statement requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenFence {
    /// None: an insert, or a claim of a queued row (conditional on its state,
    /// due time and fingerprint instead).
    None,
    /// The row's token must equal the one the caller holds or read.
    Matches,
}

/// What the statement requires of the cancel-requested flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelFence {
    /// Taken whether or not a cancel was requested.
    Any,
    /// Refused while a cancel is requested (the owner must cancel instead).
    NotRequested,
}

/// What the statement requires of the claim's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseFence {
    /// No requirement.
    Any,
    /// The lease must be over by the database's clock.
    Expired,
}

/// What the statement does to the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenWrite {
    /// Unchanged.
    Keep,
    /// A new record with token 0 (never claimed).
    Zero,
    /// A new record with token 1 (claimed on insert).
    One,
    /// Token + 1: a new claim fences out every earlier one.
    Next,
}

/// A column a transition writes (besides `state`, `token` and `updated_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Write {
    /// `fingerprint` and `payload`, on insert.
    Payload,
    /// `owner`: the claimer.
    Owner,
    /// `attempts` + 1 (1 on insert).
    Attempts,
    /// `claimed_at` = now.
    ClaimedAt,
    /// `lease_until` = now + lease.
    LeaseUntil,
    /// `lease_until` = NULL: no claim is live.
    LeaseCleared,
    /// `due_at` = now + the given delay (a retry's backoff; 0 when none).
    DueAt,
    /// `external_ref`, when given (kept otherwise).
    ExternalRef,
    /// `result`, when given (kept otherwise).
    Result,
    /// `error`: the reason, when given (kept otherwise; replaced, NULL when
    /// none, on a move to completed).
    Error,
    /// `completed_at` = now.
    CompletedAt,
    /// `cancel_requested` = true.
    CancelRequested,
    /// `cancel_requested` = false.
    CancelRequestedCleared,
}

/// What one transition requires and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// The transition's name (snake case), the same in every client.
    pub name: &'static str,
    /// Who takes it.
    pub by: Actor,
    /// The state the row must be in; `None`: no row may exist yet.
    pub from: Option<State>,
    /// The state it moves to.
    pub to: State,
    /// The token the statement requires.
    pub token: TokenFence,
    /// What it requires of the cancel-requested flag.
    pub cancel: CancelFence,
    /// What it requires of the lease.
    pub lease: LeaseFence,
    /// What it does to the token.
    pub token_write: TokenWrite,
    /// The columns it writes.
    pub writes: &'static [Write],
    /// The statement that runs it: the file name under each store's `queries/`.
    pub statement: &'static str,
    /// When it is taken, in words.
    pub when: &'static str,
}

/// How a stale claim is settled, or an unknown outcome by its owner: the
/// stale-claim policy's three answers.
pub type TakeOver = Settle;

/// A fenced move of a row that exists, run by the `move` statement
/// ([`crate::Store::op_move`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Move {
    /// The owner records the effect done.
    Complete,
    /// The owner gives the claim back: the effect surely did not happen.
    Release,
    /// The owner records a permanent failure (or the policy gives up).
    Fail,
    /// The owner holds the operation for a person: the outcome is unknown.
    Hold,
    /// The owner acknowledges a cancel request: stopped before the effect,
    /// or withdrew it at the destination after.
    CancelClaimed,
    /// The owner completes although a cancel was requested: the withdraw
    /// failed and the item is live at the destination.
    CompleteWithdrawFailed,
    /// An operator cancels a queued operation.
    CancelQueued,
    /// An operator's cancel parks a queued operation that an earlier claim
    /// may have sent, when the destination cannot be asked: its retry is
    /// stopped and a person resolves it.
    HoldQueued,
    /// An operator cancels a failed operation.
    CancelFailed,
    /// An operator cancels a completed operation after withdrawing it at the
    /// destination.
    CancelCompleted,
    /// A person resolves a held operation: the effect happened.
    ResolveCompleted,
    /// A person resolves a held operation: it did not; do it.
    ResolveQueued,
    /// A person resolves a held operation: give it up.
    ResolveFailed,
    /// A person resolves a held operation: cancel it.
    ResolveCancelled,
}

/// Every named transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// Record an operation queued, unless one exists.
    Enqueue,
    /// Insert the record claimed (the unique constraint decides the race).
    Claim,
    /// Claim a queued record that is due (one at a time or in a batch).
    ClaimQueued,
    /// The owner renews its lease and reads the cancel request.
    Heartbeat,
    /// An operator asks the owner of a live claim to cancel.
    RequestCancel,
    /// Settle a claim whose lease is over, by policy, under a new token.
    TakeOver(Settle),
    /// A fenced move of an existing row.
    Move(Move),
}

impl Move {
    /// Every move.
    pub const ALL: [Move; 14] = [
        Move::Complete,
        Move::Release,
        Move::Fail,
        Move::Hold,
        Move::CancelClaimed,
        Move::CompleteWithdrawFailed,
        Move::CancelQueued,
        Move::HoldQueued,
        Move::CancelFailed,
        Move::CancelCompleted,
        Move::ResolveCompleted,
        Move::ResolveQueued,
        Move::ResolveFailed,
        Move::ResolveCancelled,
    ];

    /// The move's rule.
    pub fn rule(self) -> &'static Rule {
        Transition::Move(self).rule()
    }

    /// The state the row must be in.
    pub fn from(self) -> State {
        match self {
            Move::Complete
            | Move::Release
            | Move::Fail
            | Move::Hold
            | Move::CancelClaimed
            | Move::CompleteWithdrawFailed => State::Claimed,
            Move::CancelQueued | Move::HoldQueued => State::Queued,
            Move::CancelFailed => State::Failed,
            Move::CancelCompleted => State::Completed,
            Move::ResolveCompleted
            | Move::ResolveQueued
            | Move::ResolveFailed
            | Move::ResolveCancelled => State::Held,
        }
    }

    /// The state it moves to.
    pub fn to(self) -> State {
        self.rule().to
    }

    /// The operator's cancel of an unclaimed row in `from` (queued, failed
    /// or completed), if there is one.
    pub fn cancel_from(from: State) -> Option<Move> {
        match from {
            State::Queued => Some(Move::CancelQueued),
            State::Failed => Some(Move::CancelFailed),
            State::Completed => Some(Move::CancelCompleted),
            State::Claimed | State::Held | State::Cancelled => None,
        }
    }

    /// The operator's cancel of an unclaimed row in `from` that an earlier
    /// claim may have acted on ([`unclaimed_may_have_acted`]) when the
    /// destination cannot be asked: a queued row is held (its retry would
    /// send again; nobody knows whether an item is live, so a person
    /// resolves it); a failed one is left as it is (nothing retries it).
    pub fn cancel_not_looked_up(from: State) -> Option<Move> {
        match from {
            State::Queued => Some(Move::HoldQueued),
            State::Failed | State::Completed | State::Claimed | State::Held | State::Cancelled => {
                None
            }
        }
    }

    /// A person's resolution of a held row to `to`, if `to` is one.
    pub fn resolve_to(to: State) -> Option<Move> {
        match to {
            State::Completed => Some(Move::ResolveCompleted),
            State::Queued => Some(Move::ResolveQueued),
            State::Failed => Some(Move::ResolveFailed),
            State::Cancelled => Some(Move::ResolveCancelled),
            State::Claimed | State::Held => None,
        }
    }

    /// The parameters of this move of `job_type:op_key` under `token`: its
    /// from-state, to-state and cancel fence come from its [`Rule`]; the
    /// values it writes are added with the `with_*` setters of [`OpMove`].
    pub fn op<'a>(self, job_type: &'a str, op_key: &'a str, token: i64) -> OpMove<'a> {
        let rule = self.rule();
        OpMove {
            job_type,
            op_key,
            token,
            from: self.from(),
            to: rule.to,
            unless_cancel_requested: rule.cancel == CancelFence::NotRequested,
            external_ref: None,
            result: None,
            error: None,
            retry_after: None,
        }
    }
}

/// The columns every move writes by its to-state (the `move` statement).
const fn move_writes(to: State) -> &'static [Write] {
    match to {
        State::Completed => &[
            Write::ExternalRef,
            Write::Result,
            Write::Error,
            Write::CompletedAt,
            Write::LeaseCleared,
        ],
        State::Queued => &[
            Write::ExternalRef,
            Write::Result,
            Write::Error,
            Write::DueAt,
            Write::LeaseCleared,
            Write::CancelRequestedCleared,
        ],
        _ => &[
            Write::ExternalRef,
            Write::Result,
            Write::Error,
            Write::LeaseCleared,
        ],
    }
}

const fn owner_move(
    name: &'static str,
    to: State,
    cancel: CancelFence,
    when: &'static str,
) -> Rule {
    Rule {
        name,
        by: Actor::Owner,
        from: Some(State::Claimed),
        to,
        token: TokenFence::Matches,
        cancel,
        lease: LeaseFence::Any,
        token_write: TokenWrite::Keep,
        writes: move_writes(to),
        statement: "move",
        when,
    }
}

const fn operator_move(name: &'static str, from: State, to: State, when: &'static str) -> Rule {
    Rule {
        name,
        by: Actor::Operator,
        from: Some(from),
        to,
        token: TokenFence::Matches,
        cancel: CancelFence::Any,
        lease: LeaseFence::Any,
        token_write: TokenWrite::Keep,
        writes: move_writes(to),
        statement: "move",
        when,
    }
}

const fn take_over(name: &'static str, to: State, when: &'static str) -> Rule {
    Rule {
        name,
        by: Actor::Worker,
        from: Some(State::Claimed),
        to,
        token: TokenFence::Matches,
        cancel: CancelFence::Any,
        lease: LeaseFence::Expired,
        token_write: TokenWrite::Next,
        writes: match to {
            State::Claimed => &[
                Write::Owner,
                Write::Attempts,
                Write::ClaimedAt,
                Write::LeaseUntil,
                Write::Error,
            ],
            _ => &[Write::Owner, Write::LeaseCleared, Write::Error],
        },
        statement: "take_over",
        when,
    }
}

const ENQUEUE: Rule = Rule {
    name: "enqueue",
    by: Actor::Producer,
    from: None,
    to: State::Queued,
    token: TokenFence::None,
    cancel: CancelFence::Any,
    lease: LeaseFence::Any,
    token_write: TokenWrite::Zero,
    writes: &[Write::Payload, Write::DueAt],
    statement: "enqueue",
    when: "the operation is recorded for a relay (outbox); a row that exists is left as it is",
};
const CLAIM: Rule = Rule {
    name: "claim",
    by: Actor::Worker,
    from: None,
    to: State::Claimed,
    token: TokenFence::None,
    cancel: CancelFence::Any,
    lease: LeaseFence::Any,
    token_write: TokenWrite::One,
    writes: &[
        Write::Payload,
        Write::Owner,
        Write::Attempts,
        Write::ClaimedAt,
        Write::LeaseUntil,
    ],
    statement: "claim",
    when: "a delivery of an operation not yet recorded; the unique constraint lets one insert win",
};
const CLAIM_QUEUED: Rule = Rule {
    name: "claim_queued",
    by: Actor::Worker,
    from: Some(State::Queued),
    to: State::Claimed,
    token: TokenFence::None,
    cancel: CancelFence::Any,
    lease: LeaseFence::Any,
    token_write: TokenWrite::Next,
    writes: &[
        Write::Owner,
        Write::Attempts,
        Write::ClaimedAt,
        Write::LeaseUntil,
    ],
    statement: "claim",
    when: "a queued row that is due (and, for a delivery, carries the same payload fingerprint)",
};
const HEARTBEAT: Rule = Rule {
    name: "heartbeat",
    by: Actor::Owner,
    from: Some(State::Claimed),
    to: State::Claimed,
    token: TokenFence::Matches,
    cancel: CancelFence::Any,
    lease: LeaseFence::Any,
    token_write: TokenWrite::Keep,
    writes: &[Write::LeaseUntil],
    statement: "heartbeat",
    when:
        "while a long effect runs; returns the cancel request, and nothing when the claim is gone",
};
const REQUEST_CANCEL: Rule = Rule {
    name: "request_cancel",
    by: Actor::Operator,
    from: Some(State::Claimed),
    to: State::Claimed,
    token: TokenFence::Matches,
    cancel: CancelFence::Any,
    lease: LeaseFence::Any,
    token_write: TokenWrite::Keep,
    writes: &[Write::CancelRequested],
    statement: "request_cancel",
    when: "a cancel of a live claim: the owner stops before the effect or withdraws it after",
};
const TAKE_OVER_REDO: Rule = take_over(
    "take_over",
    State::Claimed,
    "a claim past its lease whose effect may be redone (keyed, lookup, the first redo of at-least-once)",
);
const TAKE_OVER_HOLD: Rule = take_over(
    "take_over_hold",
    State::Held,
    "a claim past its lease under hold, or a second one under at-least-once",
);
const TAKE_OVER_FAIL: Rule = take_over(
    "take_over_fail",
    State::Failed,
    "a claim past its lease under at-most-once",
);
const COMPLETE: Rule = owner_move(
    "complete",
    State::Completed,
    CancelFence::NotRequested,
    "the effect is done; refused while a cancel is requested (the owner withdraws instead)",
);
const RELEASE: Rule = owner_move(
    "release",
    State::Queued,
    CancelFence::NotRequested,
    "the effect surely did not happen (not sent, a safe redo, an unstarted claim at shutdown); \
     refused while a cancel is requested (the owner cancels instead)",
);
const FAIL: Rule = owner_move(
    "fail",
    State::Failed,
    CancelFence::Any,
    "a permanent failure, or an unknown outcome under at-most-once",
);
const HOLD: Rule = owner_move(
    "hold",
    State::Held,
    CancelFence::Any,
    "an unknown outcome under hold (or a second under at-least-once), or under a cancel request \
     with nothing to withdraw",
);
const CANCEL_CLAIMED: Rule = owner_move(
    "cancel_claimed",
    State::Cancelled,
    CancelFence::Any,
    "after a cancel request: the owner stopped before the effect, or withdrew it after",
);
const COMPLETE_WITHDRAW_FAILED: Rule = owner_move(
    "complete_withdraw_failed",
    State::Completed,
    CancelFence::Any,
    "after a cancel request the effect happened and its withdraw failed: completed, and says so",
);
const CANCEL_QUEUED: Rule = operator_move(
    "cancel_queued",
    State::Queued,
    State::Cancelled,
    "an operator's cancel of a queued operation: at once when never claimed, otherwise once a \
     lookup at the destination found nothing or the item found was withdrawn",
);
const HOLD_QUEUED: Rule = operator_move(
    "hold_queued",
    State::Queued,
    State::Held,
    "an operator's cancel of a queued operation claimed before, when the destination cannot be \
     asked whether an earlier claim sent it: the retry is stopped and a person resolves it",
);
const CANCEL_FAILED: Rule = operator_move(
    "cancel_failed",
    State::Failed,
    State::Cancelled,
    "an operator's cancel of a failed operation, once a lookup at the destination found nothing \
     or the item found was withdrawn",
);
const CANCEL_COMPLETED: Rule = operator_move(
    "cancel_completed",
    State::Completed,
    State::Cancelled,
    "an operator's cancel of a completed operation, only after it was withdrawn at the destination",
);
const RESOLVE_COMPLETED: Rule = operator_move(
    "resolve_completed",
    State::Held,
    State::Completed,
    "a person found the effect at the destination",
);
const RESOLVE_QUEUED: Rule = operator_move(
    "resolve_queued",
    State::Held,
    State::Queued,
    "a person found the effect missing: queue it to be done",
);
const RESOLVE_FAILED: Rule = operator_move(
    "resolve_failed",
    State::Held,
    State::Failed,
    "a person gives the operation up",
);
const RESOLVE_CANCELLED: Rule = operator_move(
    "resolve_cancelled",
    State::Held,
    State::Cancelled,
    "a person cancels the operation",
);

impl Transition {
    /// Every transition, in the order of [`table`].
    pub const ALL: [Transition; 22] = [
        Transition::Enqueue,
        Transition::Claim,
        Transition::ClaimQueued,
        Transition::Heartbeat,
        Transition::RequestCancel,
        Transition::TakeOver(Settle::Redo),
        Transition::TakeOver(Settle::Hold),
        Transition::TakeOver(Settle::Fail),
        Transition::Move(Move::Complete),
        Transition::Move(Move::Release),
        Transition::Move(Move::Fail),
        Transition::Move(Move::Hold),
        Transition::Move(Move::CancelClaimed),
        Transition::Move(Move::CompleteWithdrawFailed),
        Transition::Move(Move::CancelQueued),
        Transition::Move(Move::HoldQueued),
        Transition::Move(Move::CancelFailed),
        Transition::Move(Move::CancelCompleted),
        Transition::Move(Move::ResolveCompleted),
        Transition::Move(Move::ResolveQueued),
        Transition::Move(Move::ResolveFailed),
        Transition::Move(Move::ResolveCancelled),
    ];

    /// What the transition requires and writes.
    pub fn rule(self) -> &'static Rule {
        match self {
            Transition::Enqueue => &ENQUEUE,
            Transition::Claim => &CLAIM,
            Transition::ClaimQueued => &CLAIM_QUEUED,
            Transition::Heartbeat => &HEARTBEAT,
            Transition::RequestCancel => &REQUEST_CANCEL,
            Transition::TakeOver(Settle::Redo) => &TAKE_OVER_REDO,
            Transition::TakeOver(Settle::Hold) => &TAKE_OVER_HOLD,
            Transition::TakeOver(Settle::Fail) => &TAKE_OVER_FAIL,
            Transition::Move(m) => match m {
                Move::Complete => &COMPLETE,
                Move::Release => &RELEASE,
                Move::Fail => &FAIL,
                Move::Hold => &HOLD,
                Move::CancelClaimed => &CANCEL_CLAIMED,
                Move::CompleteWithdrawFailed => &COMPLETE_WITHDRAW_FAILED,
                Move::CancelQueued => &CANCEL_QUEUED,
                Move::HoldQueued => &HOLD_QUEUED,
                Move::CancelFailed => &CANCEL_FAILED,
                Move::CancelCompleted => &CANCEL_COMPLETED,
                Move::ResolveCompleted => &RESOLVE_COMPLETED,
                Move::ResolveQueued => &RESOLVE_QUEUED,
                Move::ResolveFailed => &RESOLVE_FAILED,
                Move::ResolveCancelled => &RESOLVE_CANCELLED,
            },
        }
    }

    /// The transition's name.
    pub fn name(self) -> &'static str {
        self.rule().name
    }
}

/// Every rule, in the order of [`Transition::ALL`].
pub fn table() -> Vec<&'static Rule> {
    Transition::ALL.iter().map(|t| t.rule()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_moves_agree_with_their_rules() {
        let mut names: Vec<_> = table().iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Transition::ALL.len());
        for m in Move::ALL {
            let r = m.rule();
            assert_eq!(r.from, Some(m.from()), "{}", r.name);
            assert_eq!(r.statement, "move", "{}", r.name);
            let p = m.op("j", "k", 7);
            assert_eq!((p.from, p.to, p.token), (m.from(), r.to, 7));
            assert_eq!(
                p.unless_cancel_requested,
                r.cancel == CancelFence::NotRequested
            );
        }
        for s in State::ALL {
            if let Some(m) = Move::cancel_from(s) {
                assert_eq!((m.from(), m.to()), (s, State::Cancelled));
            }
            if let Some(m) = Move::cancel_not_looked_up(s) {
                assert_eq!((m.from(), m.to()), (s, State::Held));
                assert_eq!(m.rule().by, Actor::Operator);
            }
            if let Some(m) = Move::resolve_to(s) {
                assert_eq!((m.from(), m.to()), (State::Held, s));
            }
        }
    }

    /// The bug this definition removed: a release that forgets a cancel
    /// request. Every move back to queued by the owner refuses one.
    #[test]
    fn an_owner_never_moves_a_cancel_requested_claim_to_queued() {
        for m in Move::ALL {
            let r = m.rule();
            if r.by == Actor::Owner && r.to == State::Queued {
                assert_eq!(r.cancel, CancelFence::NotRequested, "{}", r.name);
            }
        }
    }
}
