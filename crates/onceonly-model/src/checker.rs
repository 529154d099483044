//! The model as stateright sees it, its properties, and one call that
//! checks it and says what it found.

use std::time::{Duration, Instant};

use onceonly::{EffectKind, State};
use stateright::{Checker, Model as _, Property};

use crate::step::Action;
use crate::{
    allowed_effects, allowed_live_after_cancel, Bounds, Bug, Canceller, History, Model, Worker,
    World,
};

/// The checker's answer for one model.
#[derive(Debug, Clone)]
pub struct Report {
    /// The effect kind checked.
    pub kind: EffectKind,
    /// The bug planted, if any.
    pub bug: Option<Bug>,
    /// States generated, repeats included.
    pub states: usize,
    /// Distinct states explored.
    pub unique_states: usize,
    /// The longest path explored.
    pub max_depth: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// Properties broken, each with the steps that break it.
    pub violations: Vec<(&'static str, Vec<String>)>,
    /// `sometimes` properties reached (the model is not vacuous).
    pub reached: Vec<&'static str>,
    /// `sometimes` properties never reached.
    pub unreached: Vec<&'static str>,
}

/// Effects per operation within what the kind and policy allow.
pub const EFFECTS_WITHIN_POLICY: &str =
    "effects per operation within what the kind and policy allow";
/// No write by a claim that is no longer the owner lands.
pub const NO_STALE_WRITE: &str = "no write by a claim that is no longer the owner lands";
/// Cancelled means nothing live at the destination.
pub const CANCELLED_NOTHING_LIVE: &str = "cancelled means nothing live at the destination";
/// Completed is never overwritten by failed.
pub const COMPLETED_NOT_FAILED: &str = "completed is never overwritten by failed";
/// A cancel request is never dropped.
pub const CANCEL_NOT_DROPPED: &str = "a cancel request is never dropped (moved back to queued)";
/// A requested cancel never ends completed with the item live, unless the
/// withdraw failed and the record says so.
pub const CANCEL_KEPT: &str =
    "a requested cancel never ends completed and live, unless its withdraw failed and says so";
/// Reached only where the destination can look up: an operator's cancel of
/// a queued or failed row withdrew the item an earlier claim had sent.
pub const CANCEL_WITHDREW_EARLIER: &str =
    "an operator's cancel withdrew the item an earlier claim of a queued or failed row sent";
/// Reached only where the destination cannot look up: an operator's cancel
/// held a queued row an earlier claim may have sent, stopping its retry.
pub const CANCEL_HELD_UNLOOKED: &str =
    "an operator's cancel held a queued row an earlier claim may have sent, not looked up";
/// Liveness: no claim is left when nothing more can happen.
pub const STALE_SETTLED: &str = "a stale claim is always eventually settled by its policy";

impl stateright::Model for Model {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let b = self.bounds;
        vec![World {
            row: None,
            owner: None,
            workers: vec![Worker::Idle; usize::from(b.workers)],
            items: Vec::new(),
            canceller: Canceller::Idle,
            cancel_accepted: false,
            deliveries: b.deliveries,
            crashes: b.crashes,
            cancels: b.cancels,
            shutdowns: b.shutdowns,
            expiries: b.expiries,
            resolved: false,
            history: History::default(),
        }]
    }

    fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        self.steps(w, actions);
    }

    fn next_state(&self, w: &World, action: Action) -> Option<World> {
        Some(self.step(w, action))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(EFFECTS_WITHIN_POLICY, |m: &Model, w: &World| {
                w.items.len() <= allowed_effects(m.kind)
            }),
            Property::always(NO_STALE_WRITE, |_, w: &World| !w.history.stale_write_landed),
            Property::always(CANCELLED_NOTHING_LIVE, |m: &Model, w: &World| {
                w.row.is_none_or(|r| r.state != State::Cancelled)
                    || w.live_items() <= allowed_live_after_cancel(m.kind)
            }),
            Property::always(COMPLETED_NOT_FAILED, |_, w: &World| {
                !w.history.completed_then_failed
            }),
            Property::always(CANCEL_NOT_DROPPED, |_, w: &World| {
                !w.history.cancel_request_dropped
            }),
            Property::always(CANCEL_KEPT, |_, w: &World| {
                !(w.cancel_accepted
                    && w.row.is_some_and(|r| r.state == State::Completed)
                    && w.live_items() > 0
                    && !w.history.withdraw_failed)
            }),
            // stateright's `eventually` judges a path at its end; this model
            // has no cycles (every step spends a budget or moves the token
            // on), so "at the end of every path" is checked directly: when
            // nothing more can happen, no claim is left, live or stale.
            Property::always(STALE_SETTLED, |m: &Model, w: &World| {
                let mut next = Vec::new();
                m.steps(w, &mut next);
                !next.is_empty() || w.row.is_none_or(|r| r.state != State::Claimed)
            }),
            Property::sometimes("completed", |_, w: &World| {
                w.row.is_some_and(|r| r.state == State::Completed)
            }),
            Property::sometimes("a stale claim taken over", |_, w: &World| {
                w.history.took_over
            }),
            Property::sometimes("cancelled", |_, w: &World| {
                w.row.is_some_and(|r| r.state == State::Cancelled)
            }),
        ];
        if self.kind == EffectKind::Lookup {
            properties.push(Property::sometimes(
                CANCEL_WITHDREW_EARLIER,
                |_, w: &World| w.history.cancel_withdrew_earlier,
            ));
        } else if self.kind != EffectKind::Local {
            // (A local effect commits with its claim: nothing is queued
            // after one.)
            properties.push(Property::sometimes(CANCEL_HELD_UNLOOKED, |_, w: &World| {
                w.history.cancel_held_unlooked
            }));
        }
        properties
    }
}

/// The properties every model must keep.
pub const INVARIANTS: [&str; 7] = [
    EFFECTS_WITHIN_POLICY,
    NO_STALE_WRITE,
    CANCELLED_NOTHING_LIVE,
    COMPLETED_NOT_FAILED,
    CANCEL_NOT_DROPPED,
    CANCEL_KEPT,
    STALE_SETTLED,
];

/// Checks the model of `kind` within `bounds` (with `bug` planted, if any),
/// breadth first on two threads, every reachable state.
pub fn check(kind: EffectKind, bounds: Bounds, bug: Option<Bug>) -> Report {
    let model = Model { kind, bounds, bug };
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    let mut violations = Vec::new();
    let mut reached = Vec::new();
    let mut unreached = Vec::new();
    let discoveries = checker.discoveries();
    for p in checker.model().properties() {
        let found = discoveries.get(p.name);
        match (p.expectation, found) {
            (stateright::Expectation::Sometimes, Some(_)) => reached.push(p.name),
            (stateright::Expectation::Sometimes, None) => unreached.push(p.name),
            (_, Some(path)) => {
                let steps = path
                    .clone()
                    .into_actions()
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect();
                violations.push((p.name, steps));
            }
            (_, None) => {}
        }
    }
    Report {
        kind,
        bug,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed: started.elapsed(),
        violations,
        reached,
        unreached,
    }
}
