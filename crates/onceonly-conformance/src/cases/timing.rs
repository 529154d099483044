//! Timing: a heartbeat keeps a long job's claim, a job past its timeout is
//! stopped before it acts, and a heartbeat that finds its claim gone stops
//! the job. Real (short) durations: tokio's timers drive these.

use std::time::{Duration, Instant};

use onceonly::store::OpTakeOver;
use onceonly::{EffectKind, Error, Guard, JobSpec, Outcome, State, Store};

use super::support::{is_first_done, order, record};
use crate::effects::CountingEffect;
use crate::StoreFactory;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A job whose timeout exceeds its lease, with a heartbeat at lease/3,
/// keeps its claim while it runs: another delivery past the first lease
/// sees it in progress; the job completes once.
pub async fn heartbeat_keeps_a_long_job_claimed<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let other = factory.second(&store).await;
    // Real timers drive heartbeats; the margins are wide so a loaded
    // 2-core machine (CI compiling next door) does not miss a beat.
    let lease = ms(900);
    let spec = JobSpec::new("long", EffectKind::Keyed)
        .lease(lease)
        .timeout(ms(3000))
        .heartbeat(ms(150));
    let worker = Guard::new(store.clone(), spec.clone()).unwrap();
    let observer = Guard::new(other, spec).unwrap();
    let dest = CountingEffect::keyed();
    let slow = dest.clone().with_delay(ms(1800));

    let payload = order(1);
    let (outcome, ()) = tokio::join!(worker.run("op", &payload, &slow), async {
        for (at, wait) in [(1100, 1100), (1500, 400)] {
            tokio::time::sleep(ms(wait)).await;
            match observer.run("op", &order(1), &dest).await.unwrap() {
                Outcome::InProgress { age, .. } => {
                    assert!(
                        age > lease,
                        "at {at}ms the claim ({age:?} old) has outlived one lease"
                    )
                }
                other => panic!("at {at}ms the long job's claim must be live, got {other:?}"),
            }
            let snap = store.op_get("long", "op").await.unwrap().unwrap();
            assert!(
                snap.record.lease_until > Some(snap.now),
                "at {at}ms the lease was renewed"
            );
        }
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
    let started = Instant::now();
    let outcome = worker
        .run("op", &order(1), &dest.clone().with_delay(ms(1500)))
        .await
        .unwrap();
    assert!(
        started.elapsed() < ms(1000),
        "stopped at the timeout, not after the effect"
    );
    assert!(
        matches!(outcome, Outcome::RetryLater { .. }),
        "keyed: safe to redo: {outcome:?}"
    );
    tokio::time::sleep(ms(1600)).await;
    assert_eq!(dest.calls("op"), 0, "the stopped effect never acted");
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
    // Long enough that a heartbeat delayed by a loaded machine still comes first.
    let slow = dest.clone().with_delay(ms(2000));

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
    tokio::time::sleep(ms(2100)).await;
    assert_eq!(dest.calls("op"), 0, "the stopped effect never acted");
    let r = record(&store, "long", "op").await;
    assert_eq!(
        (r.state, r.token, r.owner.as_deref()),
        (State::Claimed, 2, Some("intruder"))
    );
}
