//! The steps of the world: each is one statement of the protocol (through
//! its definition) plus what the actor decides from its answer, as the
//! guard, the relay and the operator's operations decide it.

use onceonly::protocol::{
    cancel_unsent, policy, unclaimed_may_have_acted, Actor, Args, CancelFence, Move, Rule, Settle,
    TokenFence,
};
use onceonly::{EffectKind, State};

use crate::{Bug, Canceller, Claim, Item, Model, Reported, Worker, World};

/// What the destination did when a worker performed the effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Branch {
    /// Done: the item exists and the worker has its reference.
    Done,
    /// Surely not sent.
    NotSent,
    /// Unknown to the worker; the item was created.
    UnknownSent,
    /// Unknown to the worker; the item was not created.
    UnknownLost,
    /// Refused for good.
    Failed,
}

/// One step of one actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The queue delivers the message to a worker, which claims.
    Deliver(u8),
    /// The relay's stale sweep: an idle worker reads a claim past its lease.
    Sweep(u8),
    /// The worker takes the stale claim over, by policy.
    TakeOver(u8),
    /// The worker renews its lease and reads the cancel request.
    Heartbeat(u8),
    /// The worker performs the effect (or looks it up first).
    Perform(u8, Branch),
    /// The worker records what the effect reported; `true`: a withdraw,
    /// if one is needed, works.
    Record(u8, bool),
    /// The relay stops and gives back an unstarted claim.
    GiveBack(u8),
    /// The worker's process dies.
    Crash(u8),
    /// Time passes: the current claim's lease runs out. An owner that has
    /// not finished its effect was stopped by its timeout (or by a lease
    /// it could not renew) first: its outcome is unknown, and `true` says
    /// the effect reached the destination before it stopped.
    Expire(bool),
    /// The operator's cancel reads the row.
    CancelRead,
    /// The operator's cancel writes; `true`: a withdraw at the destination works.
    CancelWrite(bool),
    /// A person resolves a held operation.
    Resolve,
}

impl Model {
    fn rule(&self, m: Move) -> Rule {
        let rule = m.rule().clone();
        match (self.bug, m) {
            (Some(Bug::CompleteIgnoresToken), Move::Complete) => Rule {
                token: TokenFence::None,
                ..rule
            },
            _ => rule,
        }
    }

    /// Every step the actors can take in `w`.
    pub(crate) fn steps(&self, w: &World, out: &mut Vec<Action>) {
        let row = w.row;
        let stale = row.is_some_and(|r| r.state == State::Claimed && !r.lease_live);
        for (i, worker) in w.workers.iter().enumerate() {
            let i = i as u8;
            match *worker {
                Worker::Idle => {
                    if w.deliveries > 0 {
                        out.push(Action::Deliver(i));
                    }
                    if stale {
                        out.push(Action::Sweep(i));
                    }
                    continue;
                }
                Worker::Stale { .. } => out.push(Action::TakeOver(i)),
                Worker::Claimed(c) => {
                    if c.heartbeats > 0 {
                        out.push(Action::Heartbeat(i));
                    }
                    if w.shutdowns > 0 {
                        out.push(Action::GiveBack(i));
                    }
                    if self.looks_first(&c) && w.live_item().is_some() || c.knows_cancel {
                        // Stopped before the effect, or found by the lookup.
                        out.push(Action::Perform(i, Branch::Done));
                    } else {
                        for b in [
                            Branch::Done,
                            Branch::NotSent,
                            Branch::UnknownSent,
                            Branch::UnknownLost,
                            Branch::Failed,
                        ] {
                            out.push(Action::Perform(i, b));
                        }
                    }
                }
                Worker::Acted(_, reported) => {
                    out.push(Action::Record(i, true));
                    if matches!(reported, Reported::Done(_)) {
                        out.push(Action::Record(i, false));
                    }
                }
            }
            if w.crashes > 0 {
                out.push(Action::Crash(i));
            }
        }
        if row.is_some_and(|r| r.state == State::Claimed && r.lease_live) {
            match self.live_owner(w) {
                // Time always passes over a dead owner's claim.
                None => out.push(Action::Expire(false)),
                Some(Worker::Claimed(_)) if w.expiries > 0 => {
                    out.push(Action::Expire(true));
                    out.push(Action::Expire(false));
                }
                Some(_) if w.expiries > 0 => out.push(Action::Expire(false)),
                Some(_) => {}
            }
        }
        match w.canceller {
            Canceller::Idle if w.cancels > 0 => out.push(Action::CancelRead),
            Canceller::Read(Some(r))
                if r.state == State::Completed
                    || self.operator_looks_up() && w.live_item().is_some() =>
            {
                out.push(Action::CancelWrite(true));
                out.push(Action::CancelWrite(false));
            }
            Canceller::Read(_) => out.push(Action::CancelWrite(true)),
            _ => {}
        }
        if row.is_some_and(|r| r.state == State::Held) && !w.resolved {
            out.push(Action::Resolve);
        }
    }

    /// The worker holding the current claim, while it still runs.
    fn live_owner(&self, w: &World) -> Option<Worker> {
        let row = w.row?;
        let worker = w.workers[usize::from(w.owner?)];
        match worker {
            Worker::Claimed(c) | Worker::Acted(c, _) if c.token == row.token => Some(worker),
            _ => None,
        }
    }

    /// The operator's destination can look the operation up (a lookup
    /// effect; keyed and opaque destinations cannot be searched).
    fn operator_looks_up(&self) -> bool {
        self.kind == EffectKind::Lookup
    }

    fn looks_first(&self, c: &Claim) -> bool {
        self.kind == EffectKind::Lookup && (c.after_stale || c.attempt > 1)
    }

    /// The world after `action`.
    pub(crate) fn step(&self, w: &World, action: Action) -> World {
        let mut w = w.clone();
        match action {
            Action::Deliver(i) => {
                w.deliveries -= 1;
                self.deliver(&mut w, i);
            }
            Action::Sweep(i) => {
                let r = w.row.expect("a stale claim exists");
                w.workers[i as usize] = Worker::Stale {
                    token: r.token,
                    attempts: r.attempts,
                };
            }
            Action::TakeOver(i) => self.take_over(&mut w, i),
            Action::Heartbeat(i) => {
                let Worker::Claimed(mut c) = w.workers[i as usize] else {
                    unreachable!()
                };
                c.heartbeats -= 1;
                w.workers[i as usize] = if write(&mut w, Some(i), heartbeat(), c.token, None) {
                    c.knows_cancel = w.row.is_some_and(|r| r.cancel_requested);
                    Worker::Claimed(c)
                } else {
                    Worker::Idle
                };
            }
            Action::Perform(i, branch) => self.perform(&mut w, i, branch),
            Action::Record(i, withdraw_works) => self.record(&mut w, i, withdraw_works),
            Action::GiveBack(i) => {
                let Worker::Claimed(c) = w.workers[i as usize] else {
                    unreachable!()
                };
                w.shutdowns -= 1;
                let release = match self.bug {
                    // relay.rs before the fix: a bare claimed -> queued move.
                    Some(Bug::ReleaseIgnoresCancel) => Rule {
                        cancel: CancelFence::Any,
                        ..Move::Release.rule().clone()
                    },
                    _ => Move::Release.rule().clone(),
                };
                let instead = cancel_unsent(c.attempt, false);
                self.release_or_cancel(&mut w, i, &c, &release, instead);
                w.workers[i as usize] = Worker::Idle;
            }
            Action::Crash(i) => {
                w.crashes -= 1;
                w.workers[i as usize] = Worker::Idle;
            }
            Action::Expire(sent) => {
                if let Some(owner) = self.live_owner(&w) {
                    w.expiries -= 1;
                    if let Worker::Claimed(c) = owner {
                        // A lookup that finds the item does not send again.
                        let found = self.looks_first(&c) && w.live_item().is_some();
                        if sent && !found {
                            self.send(&mut w);
                        }
                        let i = usize::from(w.owner.expect("a live owner"));
                        w.workers[i] = Worker::Acted(c, Reported::Unknown);
                    }
                }
                if let Some(r) = w.row.as_mut() {
                    r.lease_live = false;
                }
            }
            Action::CancelRead => {
                w.cancels -= 1;
                w.canceller = Canceller::Read(w.row);
            }
            Action::CancelWrite(withdraw_works) => self.cancel_write(&mut w, withdraw_works),
            Action::Resolve => self.resolve(&mut w),
        }
        w
    }

    fn deliver(&self, w: &mut World, i: u8) {
        let claim = match w.row {
            None => onceonly::Transition::Claim,
            Some(r) if r.state == State::Queued => onceonly::Transition::ClaimQueued,
            Some(r) if r.state == State::Claimed && !r.lease_live => {
                w.workers[i as usize] = Worker::Stale {
                    token: r.token,
                    attempts: r.attempts,
                };
                return;
            }
            // Completed, failed, cancelled, held, or a live claim of
            // another worker: nothing to do for this delivery.
            Some(_) => return,
        };
        if !write(w, Some(i), claim.rule(), 0, None) {
            return;
        }
        let r = w.row.expect("claimed");
        let c = Claim {
            token: r.token,
            attempt: r.attempts,
            after_stale: false,
            knows_cancel: false,
            heartbeats: self.bounds.heartbeats,
        };
        if self.kind == EffectKind::Local {
            // Claim, effect and completion commit in one transaction (a
            // crash rolls all three back: the same world as no delivery).
            new_item(w);
            let done = write(w, Some(i), &self.rule(Move::Complete), c.token, None);
            assert!(done, "a local completion in its own transaction");
            return;
        }
        w.workers[i as usize] = Worker::Claimed(c);
    }

    fn take_over(&self, w: &mut World, i: u8) {
        let Worker::Stale { token, attempts } = w.workers[i as usize] else {
            unreachable!()
        };
        w.workers[i as usize] = Worker::Idle;
        let settle = policy(self.kind, attempts);
        let rule = onceonly::Transition::TakeOver(settle).rule();
        if !write(w, Some(i), rule, token, None) {
            return;
        }
        w.history.took_over = true;
        if settle == Settle::Redo {
            let r = w.row.expect("taken over");
            w.workers[i as usize] = Worker::Claimed(Claim {
                token: r.token,
                attempt: r.attempts,
                after_stale: true,
                knows_cancel: false,
                heartbeats: self.bounds.heartbeats,
            });
        }
    }

    fn perform(&self, w: &mut World, i: u8, branch: Branch) {
        let Worker::Claimed(c) = w.workers[i as usize] else {
            unreachable!()
        };
        let reported = if self.looks_first(&c) && w.live_item().is_some() {
            Reported::Done(w.live_item().expect("found"))
        } else if c.knows_cancel {
            Reported::Failed
        } else {
            match branch {
                Branch::Done => Reported::Done(self.send(w)),
                Branch::UnknownSent => {
                    self.send(w);
                    Reported::Unknown
                }
                Branch::UnknownLost => Reported::Unknown,
                Branch::NotSent => Reported::NotSent,
                Branch::Failed => Reported::Failed,
            }
        };
        w.workers[i as usize] = Worker::Acted(c, reported);
    }

    /// The destination takes the effect: a keyed one answers a repeat of
    /// its key with the live item; any other makes a new one.
    fn send(&self, w: &mut World) -> u32 {
        match (self.kind, w.live_item()) {
            (EffectKind::Keyed, Some(id)) => id,
            _ => new_item(w),
        }
    }

    fn record(&self, w: &mut World, i: u8, withdraw_works: bool) {
        let Worker::Acted(c, reported) = w.workers[i as usize] else {
            unreachable!()
        };
        w.workers[i as usize] = Worker::Idle;
        match reported {
            Reported::Done(id) => {
                if write(w, Some(i), &self.rule(Move::Complete), c.token, Some(id)) {
                    return;
                }
                // Refused: a cancel was requested meanwhile (withdraw), or
                // the claim is gone (write nothing).
                if !still_ours_cancelled(w, &c) {
                    return;
                }
                if withdraw_works {
                    withdraw(w, id);
                    if write(w, Some(i), Move::CancelClaimed.rule(), c.token, Some(id)) {
                        w.history.compensated = true;
                    }
                } else {
                    let m = Move::CompleteWithdrawFailed.rule();
                    if write(w, Some(i), m, c.token, Some(id)) {
                        w.history.withdraw_failed = true;
                    }
                }
            }
            Reported::NotSent => {
                let instead = cancel_unsent(c.attempt, self.looks_first(&c));
                self.release_or_cancel(w, i, &c, Move::Release.rule(), instead);
            }
            Reported::Failed => {
                let m = if c.knows_cancel {
                    cancel_unsent(c.attempt, self.looks_first(&c))
                } else {
                    Move::Fail
                };
                write(w, Some(i), m.rule(), c.token, None);
            }
            Reported::Unknown => {
                let m = policy(self.kind, c.attempt).owner_move();
                if m == Move::Release {
                    // Under a cancel request the effect may exist with no
                    // reference to withdraw: held for a person.
                    self.release_or_cancel(w, i, &c, Move::Release.rule(), Move::Hold);
                } else {
                    write(w, Some(i), m.rule(), c.token, None);
                }
            }
        }
    }

    /// Releases the claim by `release`; when a cancel was requested, takes
    /// `instead`.
    fn release_or_cancel(&self, w: &mut World, i: u8, c: &Claim, release: &Rule, instead: Move) {
        if write(w, Some(i), release, c.token, None) {
            return;
        }
        if still_ours_cancelled(w, c) {
            write(w, Some(i), instead.rule(), c.token, None);
        }
    }

    fn cancel_write(&self, w: &mut World, withdraw_works: bool) {
        let Canceller::Read(read) = w.canceller else {
            unreachable!()
        };
        let done = match read {
            None => true,
            Some(r) => match r.state {
                State::Cancelled | State::Held => true,
                State::Queued | State::Failed => self.cancel_unclaimed(w, &r, withdraw_works),
                State::Claimed => {
                    let t = onceonly::Transition::RequestCancel.rule();
                    let asked = write(w, None, t, r.token, None);
                    w.cancel_accepted |= asked;
                    asked
                }
                State::Completed => match r.external_ref {
                    Some(id) if withdraw_works => {
                        withdraw(w, id);
                        write(w, None, Move::CancelCompleted.rule(), r.token, None)
                    }
                    // Not withdrawn: it stays completed, and says so.
                    _ => true,
                },
            },
        };
        w.canceller = if done {
            Canceller::Done
        } else {
            Canceller::Idle
        };
    }

    /// The operator's cancel of a queued or failed row read as `r`
    /// (`ops::cancel`): at once when it was never claimed; otherwise only
    /// after a lookup at the destination, withdrawing what it finds (when
    /// `withdraw_works`). Without a lookup it holds a queued row
    /// ([`Move::cancel_not_looked_up`]) and leaves a failed one; when the
    /// withdraw fails it changes nothing and says so. `true` when the
    /// cancel is finished.
    fn cancel_unclaimed(
        &self,
        w: &mut World,
        r: &onceonly::protocol::Row,
        withdraw_works: bool,
    ) -> bool {
        let m = Move::cancel_from(r.state).expect("a cancel move");
        let looks =
            unclaimed_may_have_acted(r.attempts) && self.bug != Some(Bug::CancelSkipsLookup);
        if !looks {
            return write(w, None, m.rule(), r.token, None);
        }
        if !self.operator_looks_up() {
            // Not looked up: a queued row is held (its retry stopped; the
            // person resolves it), a failed one left as it is. The hold is
            // fenced on the token read.
            return match Move::cancel_not_looked_up(r.state) {
                Some(hold) => {
                    let held = write(w, None, hold.rule(), r.token, None);
                    w.history.cancel_held_unlooked |= held;
                    held
                }
                None => true,
            };
        }
        // The lookup runs on the destination as it is now. An item found is
        // withdrawn only while the row still stands as read (no claim since:
        // the item is an earlier claim's); otherwise the cancel starts over.
        // The write is fenced on the token read.
        let found = w.live_item();
        if let Some(id) = found {
            if w.row.map(|now| (now.state, now.token)) != Some((r.state, r.token)) {
                return false;
            }
            if !withdraw_works {
                return true;
            }
            withdraw(w, id);
        }
        let cancelled = write(w, None, m.rule(), r.token, found);
        if cancelled && found.is_some() {
            w.history.cancel_withdrew_earlier = true;
        }
        cancelled
    }

    /// The person looks at the destination: with a cancel requested, takes
    /// every live item down and cancels; otherwise a live item is the
    /// effect done, and none means it is to be done.
    fn resolve(&self, w: &mut World) {
        w.resolved = true;
        let r = w.row.expect("held");
        let (m, reference) = if r.cancel_requested {
            while let Some(id) = w.live_item() {
                withdraw(w, id);
            }
            (Move::ResolveCancelled, None)
        } else {
            match w.live_item() {
                Some(id) => {
                    // A duplicate (at-least-once) is taken down; one stays.
                    while let Some(extra) = w.items.iter().rev().find(|i| i.live && i.id != id) {
                        let extra = extra.id;
                        withdraw(w, extra);
                    }
                    (Move::ResolveCompleted, Some(id))
                }
                None => (Move::ResolveQueued, None),
            }
        };
        write(w, None, m.rule(), r.token, reference);
    }
}

fn heartbeat() -> &'static Rule {
    onceonly::Transition::Heartbeat.rule()
}

fn new_item(w: &mut World) -> u32 {
    let id = w.items.len() as u32 + 1;
    w.items.push(Item { id, live: true });
    id
}

fn withdraw(w: &mut World, id: u32) {
    if let Some(item) = w.items.iter_mut().find(|it| it.id == id) {
        item.live = false;
    }
}

/// The row is still this claim's, with a cancel requested.
fn still_ours_cancelled(w: &World, c: &Claim) -> bool {
    w.row
        .is_some_and(|r| r.state == State::Claimed && r.token == c.token && r.cancel_requested)
}

/// Runs one statement by `rule` on the row for `by` (a worker, or `None`
/// for the operator), and notes what the invariants need. `true` when the
/// row changed.
fn write(w: &mut World, by: Option<u8>, rule: &Rule, token: i64, reference: Option<u32>) -> bool {
    let before = w.row;
    let args = Args {
        token,
        external_ref: reference,
    };
    let Some(next) = rule.apply(before.as_ref(), args) else {
        return false;
    };
    if rule.by == Actor::Owner && by.is_some() && w.owner != by {
        w.history.stale_write_landed = true;
    }
    if let Some(b) = before {
        if b.state == State::Completed && next.state == State::Failed {
            w.history.completed_then_failed = true;
        }
        if b.cancel_requested && next.state == State::Queued {
            w.history.cancel_request_dropped = true;
        }
    }
    let new_claim = next.state == State::Claimed && before.is_none_or(|b| b.token != next.token);
    if new_claim {
        w.owner = by;
    } else if next.state != State::Claimed {
        w.owner = None;
    }
    w.row = Some(next);
    true
}
