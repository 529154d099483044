//! A model of the onceonly protocol, checked with [stateright]: workers that
//! claim, act and record (and crash at every step, lose their lease, and
//! get the message again), a relay that sweeps stale claims and gives back
//! unstarted ones at shutdown, an operator who cancels, and a person who
//! resolves held operations — against one destination of a given effect
//! kind.
//!
//! Every change of the record goes through the protocol's own definition,
//! [`onceonly::protocol`]: [`Transition::apply`] for the fences and writes,
//! [`policy`] for what a claim in doubt becomes. The stores' SQL is checked
//! against the same `apply` by the conformance suite, so what is checked
//! here is what the code does. Each worker runs the guard's own step
//! machine ([`onceonly::protocol::decide`]): the world answers its
//! statements by the transition rules on the abstract row, its effect
//! calls by the destination's items; see `docs/protocol.md`.
//!
//! ```no_run
//! use onceonly::{EffectKind, StalePolicy};
//! use onceonly_model::{check, Bounds};
//!
//! let report = check(EffectKind::Opaque(StalePolicy::Hold), Bounds::default(), None);
//! assert!(report.violations.is_empty(), "{report:?}");
//! ```
#![forbid(unsafe_code)]

pub mod checker;
mod step;

use onceonly::protocol::decide::{Decider, Step};
use onceonly::protocol::Row;
use onceonly::{EffectKind, StalePolicy};

pub use checker::{check, Report, INVARIANTS};
pub use step::{Action, Branch};

/// A bug planted on purpose, to show the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bug {
    /// The relay's shutdown release as it was: back to queued whether or
    /// not a cancel was requested (the move clears the request).
    ReleaseIgnoresCancel,
    /// A completion that does not name the claim's token: a zombie's
    /// write lands over its successor.
    CompleteIgnoresToken,
    /// The operator's cancel as it was: a queued or failed row cancelled
    /// at once, although an earlier claim may have sent the effect.
    CancelSkipsLookup,
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Bug; 3] = [
        Bug::ReleaseIgnoresCancel,
        Bug::CompleteIgnoresToken,
        Bug::CancelSkipsLookup,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Bug::ReleaseIgnoresCancel => "release-ignores-cancel",
            Bug::CompleteIgnoresToken => "complete-ignores-token",
            Bug::CancelSkipsLookup => "cancel-skips-lookup",
        }
    }
}

/// How much of the world the checker explores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bounds {
    /// Workers (queue consumers or relay loops): 2 or 3.
    pub workers: u8,
    /// Deliveries of the operation's message (first delivery and redeliveries).
    pub deliveries: u8,
    /// Worker crashes, each at any step.
    pub crashes: u8,
    /// Heartbeats per claim (renew the lease, read the cancel request).
    pub heartbeats: u8,
    /// Attempts of the operator's cancel (each a read, then a fenced write).
    pub cancels: u8,
    /// Relay shutdowns that give back an unstarted claim.
    pub shutdowns: u8,
    /// Leases that run out (time passing over a live claim).
    pub expiries: u8,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            workers: 2,
            deliveries: 3,
            crashes: 1,
            heartbeats: 1,
            cancels: 1,
            shutdowns: 1,
            expiries: 2,
        }
    }
}

/// The model: one operation, one destination of `kind`.
#[derive(Debug, Clone)]
pub struct Model {
    /// The effect kind (and stale-claim policy) of the job.
    pub kind: EffectKind,
    /// The bounds.
    pub bounds: Bounds,
    /// A planted bug, if any.
    pub bug: Option<Bug>,
}

/// Where a worker is in one delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Worker {
    /// Waiting for a message.
    Idle,
    /// Running one delivery: the guard's own step machine, waiting on a step.
    Busy(Box<Busy>),
}

/// A worker's delivery: the machine (`onceonly::protocol::decide`, the
/// guard's decisions) and what the worker's interpreter keeps beside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Busy {
    /// The machine, with the answers given so far.
    pub decider: Decider,
    /// The step it waits on.
    pub step: Step,
    /// The claim held (token), once there is one.
    pub token: Option<i64>,
    /// A heartbeat told it a cancel was requested.
    pub knows_cancel: bool,
    /// Heartbeats left.
    pub heartbeats: u8,
    /// A relay giving the claim back unstarted (its shutdown).
    pub giving_back: bool,
}

/// The operator's cancel, in two statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Canceller {
    /// Not started, or retrying.
    Idle,
    /// Read the row.
    Read(Option<Row>),
    /// Finished (cancelled, requested, or said where it stands).
    Done,
}

/// One item at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item {
    /// Its reference.
    pub id: u32,
    /// Still there (not withdrawn).
    pub live: bool,
}

/// The whole world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    /// The operation record (`None`: not written yet).
    pub row: Option<Row>,
    /// Which worker the current claim is of (the model's own bookkeeping,
    /// to tell whether a write came from the owner).
    pub owner: Option<u8>,
    /// The workers.
    pub workers: Vec<Worker>,
    /// The destination's items for this operation, ever created.
    pub items: Vec<Item>,
    /// The operator's cancel.
    pub canceller: Canceller,
    /// The operator's cancel request was accepted by the database.
    pub cancel_accepted: bool,
    /// Budgets left.
    pub deliveries: u8,
    /// Crashes left.
    pub crashes: u8,
    /// Cancel attempts left.
    pub cancels: u8,
    /// Shutdowns left.
    pub shutdowns: u8,
    /// Lease expiries left.
    pub expiries: u8,
    /// The person has resolved a held operation.
    pub resolved: bool,
    /// Facts about the history that the invariants need.
    pub history: History,
}

/// What happened along the path, for the invariants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct History {
    /// A worker's write landed while another claim was current.
    pub stale_write_landed: bool,
    /// A completed row was moved to failed.
    pub completed_then_failed: bool,
    /// A row with a cancel requested was moved back to queued.
    pub cancel_request_dropped: bool,
    /// The owner completed after a withdraw failed, and said so.
    pub withdraw_failed: bool,
    /// A stale claim was taken over (any policy).
    pub took_over: bool,
    /// An item was withdrawn after the effect (compensation).
    pub compensated: bool,
    /// An operator's cancel of a queued or failed row found an earlier
    /// claim's item at the destination and withdrew it.
    pub cancel_withdrew_earlier: bool,
    /// An operator's cancel held a queued row an earlier claim may have
    /// acted on, because the destination could not be asked.
    pub cancel_held_unlooked: bool,
}

impl World {
    /// Items still at the destination.
    pub fn live_items(&self) -> usize {
        self.items.iter().filter(|i| i.live).count()
    }

    /// The first live item's reference.
    pub fn live_item(&self) -> Option<u32> {
        self.items.iter().find(|i| i.live).map(|i| i.id)
    }
}

/// How many items an operation cancelled by the protocol may leave live:
/// the one extra at-least-once allows, which no record names.
pub fn allowed_live_after_cancel(kind: EffectKind) -> usize {
    allowed_effects(kind) - 1
}

/// How many effects (items ever created) one operation may have under `kind`.
pub fn allowed_effects(kind: EffectKind) -> usize {
    match kind {
        EffectKind::Opaque(StalePolicy::AtLeastOnce) => 2,
        _ => 1,
    }
}
