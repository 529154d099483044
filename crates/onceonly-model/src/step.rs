//! The steps of the world: the workers run the guard's own step machine
//! (`onceonly::protocol::decide`), and the world answers its steps: a
//! statement by its transition rule on the abstract row, the effect and its
//! lookup and withdraw by the destination's items. The relay's sweep and
//! shutdown, the operator's cancel and the person's resolve are modelled
//! beside it, as `ops.rs` and the relay decide them.

use onceonly::protocol::decide::{
    Answer, ClaimAnswer, Claimed, Decider, Done, EffectAnswer, Entry, FaultAnswer, Job,
    LookupAnswer, SleepAnswer, Step, StoredRow, WithdrawAnswer,
};
use onceonly::protocol::{
    unclaimed_may_have_acted, Actor, Args, CancelFence, Move, Rule, TokenFence,
};
use onceonly::{EffectKind, State, Transition};

use crate::{Bug, Busy, Canceller, Item, Model, Worker, World};

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
    /// The relay's stale sweep: an idle worker delivers the operation of a
    /// claim past its lease (and so takes it over by policy).
    Sweep(u8),
    /// The worker renews its lease and reads the cancel request.
    Heartbeat(u8),
    /// The worker acts: looks up first where its machine says, reads the
    /// cancel request, performs the effect (the destination answers as
    /// the branch says).
    Perform(u8, Branch),
    /// The worker runs the statements its machine asks for: a take-over
    /// (up to its effect), or the record of what its effect reported, to
    /// the end (a refused completion's re-read, withdraw and move
    /// included); `true`: a withdraw, if one is needed, works.
    Write(u8, bool),
    /// The relay stops and gives back an unstarted claim.
    GiveBack(u8),
    /// The worker's process dies.
    Crash(u8),
    /// Time passes: the current claim's lease runs out. An owner that has
    /// not finished its effect was stopped by its timeout (or by a lease
    /// it could not renew) first: its effect timed out, and `true` says
    /// it reached the destination before it stopped.
    Expire(bool),
    /// The operator's cancel reads the row.
    CancelRead,
    /// The operator's cancel writes; `true`: a withdraw at the destination works.
    CancelWrite(bool),
    /// A person resolves a held operation.
    Resolve,
}

/// The only fingerprint the model's deliveries carry.
const FINGERPRINT: &str = "fp";
/// The database's clock at every read (leases are live or not, no more).
const NOW: i64 = 1_000_000;

/// How an action answers the steps of a worker's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A delivery: the claim, then what follows it up to the next decision.
    Claim,
    /// The effect: lookup, cancel request, perform (`Some`: a timeout
    /// stopped it, `true` after it reached the destination).
    Act(Branch, Option<bool>),
    /// The pending take-over or move, and what follows up to the effect
    /// or the end; `true`: a withdraw works.
    Write(bool),
    /// Everything to the end, in one transaction (a local effect) or one
    /// action (a relay giving a claim back).
    All,
}

/// Whether the machine's `step` waits for an action of its worker.
fn decision(step: &Step) -> bool {
    matches!(
        step,
        Step::Lookup
            | Step::CancelRequested
            | Step::Perform { .. }
            | Step::TakeOver { .. }
            | Step::Move(_)
            | Step::Withdraw { .. }
    )
}

/// The worker has its claim and has not started its effect.
fn before_effect(step: &Step) -> bool {
    matches!(
        step,
        Step::Lookup | Step::CancelRequested | Step::Perform { .. }
    )
}

fn reference(id: u32) -> String {
    format!("item-{id}")
}

fn item_of(reference: Option<&str>) -> Option<u32> {
    reference.and_then(|r| r.strip_prefix("item-")?.parse().ok())
}

/// The row as a statement reads it.
fn stored(r: &onceonly::protocol::Row) -> StoredRow {
    let claimed = r.state == State::Claimed;
    StoredRow {
        state: r.state,
        token: r.token,
        attempts: r.attempts,
        owner: None,
        fingerprint: FINGERPRINT.into(),
        claimed_at_ms: claimed.then_some(NOW - 10),
        lease_until_ms: claimed.then_some(if r.lease_live { NOW + 10 } else { NOW - 1 }),
        due_at_ms: None,
        external_ref: r.external_ref.map(reference),
        result: None,
        error: None,
        cancel_requested: r.cancel_requested,
        now_ms: NOW,
    }
}

impl Model {
    fn rule(&self, m: Move, giving_back: bool) -> Rule {
        let rule = m.rule().clone();
        match (self.bug, m) {
            (Some(Bug::CompleteIgnoresToken), Move::Complete) => Rule {
                token: TokenFence::None,
                ..rule
            },
            // relay.rs before the fix: a bare claimed -> queued move.
            (Some(Bug::ReleaseIgnoresCancel), Move::Release) if giving_back => Rule {
                cancel: CancelFence::Any,
                ..rule
            },
            _ => rule,
        }
    }

    fn job(&self) -> Job {
        Job {
            effect: self.kind,
            // Tries under one claim are not modelled (their outcomes are).
            max_retries: 0,
            lease_ms: 30_000,
            timeout_ms: 10_000,
        }
    }

    /// Every step the actors can take in `w`.
    pub(crate) fn steps(&self, w: &World, out: &mut Vec<Action>) {
        let row = w.row;
        let stale = row.is_some_and(|r| r.state == State::Claimed && !r.lease_live);
        for (i, worker) in w.workers.iter().enumerate() {
            let i = i as u8;
            let busy = match worker {
                Worker::Idle => {
                    if w.deliveries > 0 {
                        out.push(Action::Deliver(i));
                    }
                    if stale {
                        out.push(Action::Sweep(i));
                    }
                    continue;
                }
                Worker::Busy(busy) => busy,
            };
            if before_effect(&busy.step) {
                if busy.heartbeats > 0 {
                    out.push(Action::Heartbeat(i));
                }
                if w.shutdowns > 0 {
                    out.push(Action::GiveBack(i));
                }
                if self.reaches_perform(w, i) {
                    for b in [
                        Branch::Done,
                        Branch::NotSent,
                        Branch::UnknownSent,
                        Branch::UnknownLost,
                        Branch::Failed,
                    ] {
                        out.push(Action::Perform(i, b));
                    }
                } else {
                    // Stopped before the effect, or found by the lookup.
                    out.push(Action::Perform(i, Branch::Done));
                }
            } else {
                out.push(Action::Write(i, true));
                if matches!(&busy.step, Step::Move(m) if m.to == Move::Complete) {
                    out.push(Action::Write(i, false));
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
                Some(busy) if w.expiries > 0 && before_effect(&busy.step) => {
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

    /// Whether worker `i`'s effect phase reaches the effect itself (not
    /// stopped by a cancel request, nor found by its lookup): only then do
    /// the destination's branches differ.
    fn reaches_perform(&self, w: &World, i: u8) -> bool {
        let mut w = w.clone();
        let mut performed = false;
        self.run(&mut w, i, Phase::Act(Branch::Done, None), &mut performed);
        performed
    }

    /// The worker holding the current claim, while it still runs.
    fn live_owner<'w>(&self, w: &'w World) -> Option<&'w Busy> {
        let row = w.row?;
        match &w.workers[usize::from(w.owner?)] {
            Worker::Busy(busy) if busy.token == Some(row.token) => Some(busy),
            _ => None,
        }
    }

    /// The operator's destination can look the operation up (a lookup
    /// effect; keyed and opaque destinations cannot be searched).
    fn operator_looks_up(&self) -> bool {
        self.kind == EffectKind::Lookup
    }

    /// The world after `action`.
    pub(crate) fn step(&self, w: &World, action: Action) -> World {
        let mut w = w.clone();
        let mut performed = false;
        match action {
            Action::Deliver(i) => {
                w.deliveries -= 1;
                self.start(&mut w, i);
            }
            Action::Sweep(i) => self.start(&mut w, i),
            Action::Heartbeat(i) => {
                let Worker::Busy(busy) = &mut w.workers[i as usize] else {
                    unreachable!()
                };
                busy.heartbeats -= 1;
                let token = busy.token.expect("a claim");
                let renewed = write(&mut w, Some(i), heartbeat(), token, None);
                let cancel = w.row.is_some_and(|r| r.cancel_requested);
                match &mut w.workers[i as usize] {
                    Worker::Busy(busy) if renewed => busy.knows_cancel = cancel,
                    // The claim is gone: its heartbeat stops the effect.
                    worker => *worker = Worker::Idle,
                }
            }
            Action::Perform(i, branch) => {
                self.run(&mut w, i, Phase::Act(branch, None), &mut performed)
            }
            Action::Write(i, works) => self.run(&mut w, i, Phase::Write(works), &mut performed),
            Action::GiveBack(i) => {
                w.shutdowns -= 1;
                let Worker::Busy(busy) = &w.workers[i as usize] else {
                    unreachable!()
                };
                let row = w.row.expect("a claim");
                let claim = Claimed {
                    token: busy.token.expect("a claim"),
                    attempts: row.attempts,
                };
                let entry = Entry::ReleaseUnstarted {
                    claim,
                    reason: "the relay is stopping".into(),
                };
                let mut decider = Decider::new(self.job(), entry);
                let step = decider.next(Answer::None);
                w.workers[i as usize] = Worker::Busy(Box::new(Busy {
                    decider,
                    step,
                    token: Some(claim.token),
                    knows_cancel: false,
                    heartbeats: 0,
                    giving_back: true,
                }));
                self.run(&mut w, i, Phase::All, &mut performed);
            }
            Action::Crash(i) => {
                w.crashes -= 1;
                w.workers[i as usize] = Worker::Idle;
            }
            Action::Expire(sent) => {
                if let Some(owner) = w.owner.filter(|_| self.live_owner(&w).is_some()) {
                    w.expiries -= 1;
                    if let Worker::Busy(busy) = &w.workers[usize::from(owner)] {
                        if before_effect(&busy.step) {
                            let phase = Phase::Act(Branch::UnknownLost, Some(sent));
                            self.run(&mut w, owner, phase, &mut performed);
                        }
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

    /// Worker `i` starts a delivery: the machine's `run` entry, its claim
    /// answered by the row (a local effect runs to its end in one
    /// transaction: a crash rolls it all back, the same world as none).
    fn start(&self, w: &mut World, i: u8) {
        let fingerprint = FINGERPRINT.to_owned();
        let entry = match self.kind {
            EffectKind::Local => Entry::Local { fingerprint },
            _ => Entry::Run { fingerprint },
        };
        let mut decider = Decider::new(self.job(), entry);
        let step = decider.next(Answer::None);
        w.workers[i as usize] = Worker::Busy(Box::new(Busy {
            decider,
            step,
            token: None,
            knows_cancel: false,
            heartbeats: self.bounds.heartbeats,
            giving_back: false,
        }));
        let phase = match self.kind {
            EffectKind::Local => Phase::All,
            _ => Phase::Claim,
        };
        self.run(w, i, phase, &mut false);
    }

    /// Answers worker `i`'s steps as `phase` says: the step it waits on,
    /// then every step that needs no decision of its own (audit appends,
    /// fault points, reads, sleeps), up to the next one that does or the
    /// end. `performed`: the effect itself was called.
    fn run(&self, w: &mut World, i: u8, phase: Phase, performed: &mut bool) {
        let mut first = true;
        loop {
            let Worker::Busy(busy) = &w.workers[i as usize] else {
                return;
            };
            let step = busy.step.clone();
            if step.is_end() {
                w.workers[i as usize] = Worker::Idle;
                return;
            }
            let go_on = match phase {
                Phase::All => true,
                Phase::Act(..) => before_effect(&step) || !decision(&step),
                Phase::Write(_) => !before_effect(&step),
                Phase::Claim => !decision(&step),
            };
            if !first && !go_on {
                return;
            }
            first = false;
            let answer = self.answer(w, i, &step, phase, performed);
            let Worker::Busy(busy) = &mut w.workers[i as usize] else {
                unreachable!()
            };
            busy.step = busy.decider.next(answer);
        }
    }

    /// The world's answer to worker `i`'s `step`.
    fn answer(
        &self,
        w: &mut World,
        i: u8,
        step: &Step,
        phase: Phase,
        performed: &mut bool,
    ) -> Answer {
        let Worker::Busy(busy) = &w.workers[i as usize] else {
            unreachable!()
        };
        let (knows_cancel, giving_back) = (busy.knows_cancel, busy.giving_back);
        match step {
            Step::Claim => {
                let claim = match w.row {
                    None => Transition::Claim,
                    Some(r) if r.state == State::Queued => Transition::ClaimQueued,
                    Some(r) => return Answer::Claim(ClaimAnswer::Existing(stored(&r))),
                };
                assert!(
                    write(w, Some(i), claim.rule(), 0, None),
                    "a claim of no row or a queued one"
                );
                let r = w.row.expect("claimed");
                self.hold(w, i, r.token);
                Answer::Claim(ClaimAnswer::Claimed(Claimed {
                    token: r.token,
                    attempts: r.attempts,
                }))
            }
            Step::TakeOver {
                settle,
                stale_token,
                ..
            } => {
                let rule = Transition::TakeOver(*settle).rule();
                if !write(w, Some(i), rule, *stale_token, None) {
                    return Answer::TakeOver(None);
                }
                w.history.took_over = true;
                let r = w.row.expect("taken over");
                self.hold(w, i, r.token);
                Answer::TakeOver(Some(Claimed {
                    token: r.token,
                    attempts: r.attempts,
                }))
            }
            Step::Read => Answer::Read(w.row.as_ref().map(stored)),
            Step::Move(m) => {
                let rule = self.rule(m.to, giving_back);
                let id = item_of(m.external_ref.as_deref());
                let moved = write(w, Some(i), &rule, m.token, id);
                if moved && m.to == Move::CompleteWithdrawFailed {
                    w.history.withdraw_failed = true;
                }
                if moved && m.to == Move::CancelClaimed && m.external_ref.is_some() {
                    w.history.compensated = true;
                }
                Answer::Moved(moved)
            }
            Step::Audit(_) => Answer::None,
            Step::Fault { .. } => Answer::Fault(FaultAnswer::Continue),
            Step::Sleep { .. } => Answer::Sleep(SleepAnswer::Slept),
            Step::CancelRequested => Answer::CancelRequested(knows_cancel),
            Step::Lookup => Answer::Lookup(match w.live_item() {
                Some(id) => LookupAnswer::Found {
                    external_ref: Some(reference(id)),
                    result: serde_json::Value::Null,
                },
                None => LookupAnswer::NotFound,
            }),
            Step::Perform { .. } => {
                *performed = true;
                let done = |id| {
                    EffectAnswer::Done(Done {
                        external_ref: Some(reference(id)),
                        result: serde_json::Value::Null,
                        unstored: None,
                    })
                };
                let branch = match phase {
                    Phase::Act(_, Some(sent)) => {
                        if sent {
                            self.send(w);
                        }
                        return Answer::Perform(EffectAnswer::TimedOut);
                    }
                    Phase::Act(branch, None) => branch,
                    // A local effect: done in its transaction.
                    _ => Branch::Done,
                };
                Answer::Perform(match branch {
                    Branch::Done => done(self.send(w)),
                    Branch::UnknownSent => {
                        self.send(w);
                        EffectAnswer::Unknown("unknown".into())
                    }
                    Branch::UnknownLost => EffectAnswer::Unknown("unknown".into()),
                    Branch::NotSent => EffectAnswer::NotSent("not sent".into()),
                    Branch::Failed => EffectAnswer::Failed("failed".into()),
                })
            }
            Step::Withdraw { external_ref } => {
                let works = matches!(phase, Phase::Write(true));
                match item_of(Some(external_ref)) {
                    Some(id) if works => {
                        withdraw(w, id);
                        Answer::Withdraw(WithdrawAnswer::Withdrawn)
                    }
                    _ => Answer::Withdraw(WithdrawAnswer::NotWithdrawn("not withdrawn".into())),
                }
            }
            Step::Finish { .. } | Step::Error { .. } => unreachable!("an end has no answer"),
        }
    }

    /// Worker `i` now holds the claim with `token`.
    fn hold(&self, w: &mut World, i: u8, token: i64) {
        if let Worker::Busy(busy) = &mut w.workers[i as usize] {
            busy.token = Some(token);
        }
    }

    /// The destination takes the effect: a keyed one answers a repeat of
    /// its key with the live item; any other makes a new one.
    fn send(&self, w: &mut World) -> u32 {
        match (self.kind, w.live_item()) {
            (EffectKind::Keyed, Some(id)) => id,
            _ => new_item(w),
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
