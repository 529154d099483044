//! The stale-claim policy, once: what happens when nobody can tell whether
//! an effect happened, for a claim past its lease and for an unknown
//! outcome its live owner saw alike.

use std::time::Duration;

use serde::Serialize;

use super::{Move, OpTakeOver};
use crate::record::{Record, State};
use crate::spec::{EffectKind, StalePolicy};

/// The policy's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Settle {
    /// Do the effect again under a new claim (or, for the owner, release the
    /// claim to be retried).
    Redo,
    /// Hold the operation for a person.
    Hold,
    /// Give it up as failed.
    Fail,
}

/// What to do with an operation whose effect may or may not have happened,
/// after `attempts` claims (the one in doubt included).
///
/// Keyed and lookup effects redo safely (the destination dedups, or is
/// looked up first); so does a local one (its claim and effect roll back
/// together). Opaque effects follow their policy: hold for a person,
/// give up under at-most-once, and under at-least-once redo once — a
/// second claim in doubt is held, to keep to one extra effect.
pub fn policy(kind: EffectKind, attempts: i64) -> Settle {
    match kind {
        EffectKind::Opaque(StalePolicy::Hold) => Settle::Hold,
        EffectKind::Opaque(StalePolicy::AtMostOnce) => Settle::Fail,
        EffectKind::Opaque(StalePolicy::AtLeastOnce) if attempts >= 2 => Settle::Hold,
        EffectKind::Opaque(StalePolicy::AtLeastOnce)
        | EffectKind::Keyed
        | EffectKind::Lookup
        | EffectKind::Local => Settle::Redo,
    }
}

/// The owner's move when a cancel was requested and its own claim did not
/// act (stopped before the effect, or the effect was not sent), after
/// `attempts` claims; `looked_up`: under this claim a lookup at the
/// destination found nothing.
///
/// Cancelled when nothing of the operation can be live: this is the first
/// claim, or the lookup has just found nothing. Otherwise an earlier claim
/// may have acted and nobody can tell (a keyed destination cannot be
/// searched, an opaque one not at all): held for a person, the request
/// kept.
pub fn cancel_unsent(attempts: i64, looked_up: bool) -> Move {
    if attempts <= 1 || looked_up {
        Move::CancelClaimed
    } else {
        Move::Hold
    }
}

/// Whether an operation no claim holds (queued or failed) may have an item
/// at the destination from one of its `attempts` earlier claims: yes as soon
/// as there was one. The record cannot tell a claim that surely did not act
/// from one released after an unknown outcome or given up under
/// at-most-once: `attempts` counts claims, not sends; `error` keeps only the
/// last reason; the audit trail skips a release for a retry. So an
/// operator's cancel of such a row looks at the destination first, as
/// [`cancel_unsent`] makes the owner do.
pub fn unclaimed_may_have_acted(attempts: i64) -> bool {
    attempts > 0
}

impl Settle {
    /// The state a take-over moves the stale claim to.
    pub fn to(self) -> State {
        match self {
            Settle::Redo => State::Claimed,
            Settle::Hold => State::Held,
            Settle::Fail => State::Failed,
        }
    }

    /// The owner's own move for an unknown outcome: release (to be
    /// redone), hold or fail.
    pub fn owner_move(self) -> Move {
        match self {
            Settle::Redo => Move::Release,
            Settle::Hold => Move::Hold,
            Settle::Fail => Move::Fail,
        }
    }

    /// The parameters of the take-over of `stale` (read with its token) by
    /// `owner`, to this answer's state.
    pub fn take_over<'a>(
        self,
        stale: &'a Record,
        owner: &'a str,
        lease: Duration,
        reason: &'a str,
    ) -> OpTakeOver<'a> {
        OpTakeOver {
            job_type: &stale.job_type,
            op_key: &stale.op_key,
            stale_token: stale.token,
            to: self.to(),
            owner,
            lease,
            reason,
        }
    }
}

/// One line of [`policy_table`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyRow {
    /// The effect kind (`local`, `keyed`, `lookup`, `opaque`).
    pub kind: &'static str,
    /// The stale-claim policy, for opaque effects.
    pub policy: Option<StalePolicy>,
    /// Claims taken, the one in doubt included.
    pub attempts: i64,
    /// The answer.
    pub settle: Settle,
    /// The state a take-over moves the stale claim to.
    pub take_over_to: State,
    /// The owner's own move for an unknown outcome.
    pub owner_move: &'static str,
}

/// [`policy`] for every kind and for 1 and 2 attempts (it does not change
/// after 2): the table other clients check themselves against.
pub fn policy_table() -> Vec<PolicyRow> {
    let kinds = [
        EffectKind::Local,
        EffectKind::Keyed,
        EffectKind::Lookup,
        EffectKind::Opaque(StalePolicy::Hold),
        EffectKind::Opaque(StalePolicy::AtLeastOnce),
        EffectKind::Opaque(StalePolicy::AtMostOnce),
    ];
    let mut rows = Vec::new();
    for kind in kinds {
        for attempts in [1, 2] {
            let settle = policy(kind, attempts);
            rows.push(PolicyRow {
                kind: kind.name(),
                policy: match kind {
                    EffectKind::Opaque(p) => Some(p),
                    _ => None,
                },
                attempts,
                settle,
                take_over_to: settle.to(),
                owner_move: settle.owner_move().rule().name,
            });
        }
    }
    rows
}
