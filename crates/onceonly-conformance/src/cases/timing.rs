//! Timing: a heartbeat keeps a long job's claim, a job past its timeout is
//! stopped before it acts, and a heartbeat that finds its claim gone stops
//! the job. Leases run on the database's clock, which the cases move; the
//! heartbeat and the timeout are tokio timers, kept short. An effect the
//! guard stops is seen dropped before it acted (it can never act later),
//! not waited for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceonly::store::OpTakeOver;
use onceonly::{EffectKind, Error, Guard, JobSpec, Outcome, State, Store};
use tokio::sync::{watch, Notify};

use super::support::{is_first_done, order, record, LEASE, PAST_LEASE};
use crate::effects::CountingEffect;
use crate::StoreFactory;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A clone of `dest` whose `perform` says it started, then waits until the
/// gate opens (never, if it is never opened).
fn gated(dest: &CountingEffect) -> (CountingEffect, Arc<Notify>, watch::Sender<bool>) {
    let started = Arc::new(Notify::new());
    let (open, gate) = watch::channel(false);
    let effect = dest.clone().with_hook({
        let started = started.clone();
        move |_| {
            let (started, mut gate) = (started.clone(), gate.clone());
            async move {
                started.notify_one();
                let _ = gate.wait_for(|open| *open).await;
            }
        }
    });
    (effect, started, open)
}

/// Records when it is dropped.
struct StoppedAt(Arc<std::sync::Mutex<Option<Instant>>>);

impl Drop for StoppedAt {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(Instant::now());
    }
}

/// Waits (polling, at most 10s) until the claim's lease is live on the
/// database's clock: a heartbeat renewed it.
async fn renewed<S: Store>(store: &S, job: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let snap = store.op_get(job, "op").await.unwrap().unwrap();
        if snap.record.lease_until > Some(snap.now) {
            return;
        }
        assert!(Instant::now() < deadline, "no heartbeat renewed the lease");
        tokio::time::sleep(ms(10)).await;
    }
}

/// A job whose timeout exceeds its lease, with a heartbeat, keeps its claim
/// while it runs: the database's clock moved past the lease, twice, the
/// heartbeat renews it, and another delivery sees it in progress; the job
/// completes once.
pub async fn heartbeat_keeps_a_long_job_claimed<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let other = factory.second(&store).await;
    let spec = JobSpec::new("long", EffectKind::Keyed)
        .lease(LEASE)
        .timeout(Duration::from_secs(20))
        .heartbeat(ms(50));
    let worker = Guard::new(store.clone(), spec.clone()).unwrap();
    let observer = Guard::new(other, spec).unwrap();
    let dest = CountingEffect::keyed();
    let (long, started, open) = gated(&dest);

    let payload = order(1);
    let (outcome, ()) = tokio::join!(worker.run("op", &payload, &long), async {
        started.notified().await;
        for round in 1..=2u32 {
            store.clock_offset().advance(PAST_LEASE);
            renewed(&store, "long").await;
            match observer.run("op", &order(1), &dest).await.unwrap() {
                Outcome::InProgress { age, .. } => assert!(
                    age >= PAST_LEASE * round,
                    "round {round}: the claim ({age:?} old) has outlived its lease"
                ),
                other => panic!("round {round}: the long job's claim must be live, got {other:?}"),
            }
        }
        open.send_replace(true);
    });
    assert!(is_first_done(&outcome.unwrap()));
    assert_eq!(
        (dest.calls("op"), dest.count("op")),
        (1, 1),
        "done once, by the worker"
    );
    let r = record(&store, "long", "op").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Completed, 1, 1));
}

/// A job past its timeout is stopped: the effect's future is dropped before
/// it reaches the destination, and never reaches it later.
pub async fn timeout_stops_the_effect_before_it_acts<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let spec = JobSpec::new("slow", EffectKind::Keyed)
        .lease(Duration::from_secs(30))
        .timeout(ms(60));
    let worker = Guard::new(store.clone(), spec).unwrap();
    let dest = CountingEffect::keyed();
    // An effect that would never finish: the timeout alone ends the attempt.
    let (stuck, _started, _never) = gated(&dest);
    let outcome = worker.run("op", &order(1), &stuck).await.unwrap();
    assert!(
        matches!(outcome, Outcome::RetryLater { .. }),
        "keyed: safe to redo: {outcome:?}"
    );
    assert_eq!(
        (dest.abandoned("op"), dest.calls("op")),
        (1, 0),
        "the stopped effect was dropped before it acted, so it never will"
    );
    let r = record(&store, "slow", "op").await;
    assert_eq!((r.state, r.token), (State::Queued, 1));

    store.clock_offset().advance(super::support::RETRY_BACKOFF);
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    assert_eq!(dest.count("op"), 1);
}

/// A heartbeat that finds the claim taken over stops the job before it acts
/// and reports [`Error::LostClaim`]; the new owner's row is untouched.
pub async fn heartbeat_stops_a_worker_whose_claim_was_taken<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let spec = JobSpec::new("long", EffectKind::Keyed)
        .lease(ms(300))
        .timeout(ms(4000))
        .heartbeat(ms(20));
    let worker = Guard::new(store.clone(), spec).unwrap();
    let dest = CountingEffect::keyed();
    // Never finishes: only the heartbeat's finding can end it.
    let (slow, _started, _never) = gated(&dest);

    let payload = order(1);
    let (outcome, taken) = tokio::join!(worker.run("op", &payload, &slow), async {
        while store.op_get("long", "op").await.unwrap().is_none() {
            tokio::time::sleep(ms(2)).await;
        }
        // Expire the lease on the database's clock and take the claim over
        // before the worker's next heartbeat renews it.
        loop {
            store.clock_offset().advance(Duration::from_secs(3600));
            let p = OpTakeOver {
                job_type: "long",
                op_key: "op",
                stale_token: 1,
                to: State::Claimed,
                owner: "intruder",
                lease: Duration::from_secs(3600),
                reason: "test take-over",
            };
            if let Some(claim) = store.op_take_over(&p).await.unwrap() {
                return claim;
            }
        }
    });
    assert_eq!(taken.token, 2);
    match outcome {
        Err(Error::LostClaim { token: 1, record }) => {
            assert_eq!((record.state, record.token), (State::Claimed, 2));
            assert_eq!(record.owner.as_deref(), Some("intruder"));
        }
        other => panic!("expected the lost claim, got {other:?}"),
    }
    assert_eq!(
        (dest.abandoned("op"), dest.calls("op")),
        (1, 0),
        "the stopped effect was dropped before it acted, so it never will"
    );
    let r = record(&store, "long", "op").await;
    assert_eq!(
        (r.state, r.token, r.owner.as_deref()),
        (State::Claimed, 2, Some("intruder"))
    );
}

/// A job with a heartbeat whose lease cannot be renewed (its heartbeats
/// fail: the database unreachable from this worker alone) is stopped before
/// the lease runs out, so it never acts after another worker could take it
/// over; its outcome is unknown, and a keyed one is released to be redone.
pub async fn unrenewed_lease_stops_the_effect<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let lease = ms(600);
    let spec = JobSpec::new("long", EffectKind::Keyed)
        .lease(lease)
        .timeout(Duration::from_secs(20))
        .heartbeat(ms(100));
    let cut_off = super::intercept::Intercept::failing_heartbeats(store.clone());
    let worker = Guard::new(cut_off, spec).unwrap();
    let dest = CountingEffect::keyed();
    // When the guard dropped the effect: the moment it was stopped. (What
    // follows, the release and its audit row, needs no live lease: the
    // release is fenced on the token.)
    let stopped_at = Arc::new(std::sync::Mutex::new(None));
    let never = dest.clone().with_hook({
        let stopped_at = stopped_at.clone();
        move |_| {
            let on_drop = StoppedAt(stopped_at.clone());
            async move {
                let _on_drop = on_drop;
                std::future::pending::<()>().await;
            }
        }
    });
    let started = Instant::now();
    let outcome = worker.run("op", &order(1), &never).await.unwrap();
    let stopped = stopped_at.lock().unwrap().expect("the effect was dropped");
    assert!(
        stopped - started < lease,
        "stopped within the lease it could not renew ({:?})",
        stopped - started
    );
    match outcome {
        Outcome::RetryLater { reason } => assert!(reason.contains("lease"), "{reason}"),
        other => panic!("keyed, outcome unknown: released, got {other:?}"),
    }
    assert_eq!(
        (dest.abandoned("op"), dest.calls("op")),
        (1, 0),
        "the stopped effect was dropped before it acted"
    );
    let r = record(&store, "long", "op").await;
    assert_eq!((r.state, r.token), (State::Queued, 1));
}
