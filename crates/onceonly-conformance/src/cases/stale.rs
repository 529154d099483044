//! Stale claims: a claim younger than its lease is left alone, an older one
//! follows the policy, a worker whose claim was taken over cannot write, and
//! the database's clock decides.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::join_all;
use onceonly::store::{OpHeartbeat, OpList, OpMove, OpRequestCancel, OpTakeOver};
use onceonly::{
    DbTime, EffectKind, EffectOutcome, Error, FaultPoint, Outcome, StalePolicy, State, Store,
};
use tokio::sync::Barrier;

use super::support::{
    all_records, crash_at, guard, is_first_done, job_for, order, record, LEASE, PAST_LEASE,
    REMOTE_KINDS,
};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// A claim younger than its lease is not taken over by any kind
/// ([`Outcome::InProgress`] with its age and lease); past the lease it
/// follows the kind's policy, and no stale claim is left behind.
pub async fn young_claim_left_old_claim_follows_policy<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let other = factory.second(&store).await;
    let dest = CountingEffect::opaque();
    let mut owners = Vec::new();
    for kind in REMOTE_KINDS {
        let dying =
            guard(&store, &job_for(kind), kind).with_fault_hook(crash_at(FaultPoint::AfterClaim));
        let err = dying.run("op", &order(1), &dest).await.unwrap_err();
        assert!(matches!(err, Error::InjectedCrash(_)), "{kind}: {err}");
        owners.push(dying.owner().to_owned());
    }
    let before = all_records(&store).await;

    store.clock_offset().advance(Duration::from_secs(10));
    for (kind, owner) in REMOTE_KINDS.into_iter().zip(&owners) {
        match guard(&other, &job_for(kind), kind)
            .run("op", &order(1), &dest)
            .await
            .unwrap()
        {
            Outcome::InProgress {
                age,
                lease,
                owner: o,
            } => {
                assert_eq!(lease, LEASE, "{kind}: the claim's lease");
                assert!(
                    age >= Duration::from_secs(10) && age < LEASE,
                    "{kind}: age {age:?}"
                );
                assert_eq!(o.as_ref(), Some(owner), "{kind}: who holds it");
            }
            other => panic!("{kind}: a young claim must be left alone, got {other:?}"),
        }
    }
    assert_eq!(all_records(&store).await, before, "young claims unchanged");
    assert_eq!(dest.total(), 0, "nobody acted");

    store
        .clock_offset()
        .advance(PAST_LEASE - Duration::from_secs(10));
    let stuck = store
        .op_list(&OpList {
            lease_expired: true,
            ..OpList::default()
        })
        .await
        .unwrap();
    assert_eq!(
        stuck.len(),
        REMOTE_KINDS.len(),
        "every stale claim is found"
    );
    for kind in REMOTE_KINDS {
        let outcome = guard(&other, &job_for(kind), kind)
            .run("op", &order(1), &dest)
            .await
            .unwrap();
        let r = record(&store, &job_for(kind), "op").await;
        let expected = match kind {
            EffectKind::Opaque(StalePolicy::Hold) => State::Held,
            EffectKind::Opaque(StalePolicy::AtMostOnce) => State::Failed,
            _ => State::Completed,
        };
        assert_eq!(r.state, expected, "{kind}: {outcome:?}");
        assert_eq!(r.token, 2, "{kind}: the take-over took a new token");
    }
    let stuck = store
        .op_list(&OpList {
            lease_expired: true,
            ..OpList::default()
        })
        .await
        .unwrap();
    assert!(stuck.is_empty(), "no stale claim left: {stuck:?}");
    assert!(all_records(&store)
        .await
        .iter()
        .all(|r| r.state != State::Claimed));
}

/// Both workers find the same stale claim past its lease at once, 20 runs:
/// one takes it over, 1 effect per run.
pub async fn stale_take_over_race_has_one_winner<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let kind = EffectKind::Opaque(StalePolicy::AtLeastOnce);
    let dest = CountingEffect::opaque();
    let dying = guard(&store, "race", kind).with_fault_hook(crash_at(FaultPoint::AfterClaim));
    for run in 0..20 {
        dying
            .run(&format!("op-{run}"), &order(run), &dest)
            .await
            .unwrap_err();
    }
    store.clock_offset().advance(PAST_LEASE);
    let guards = [
        Arc::new(guard(&store, "race", kind)),
        Arc::new(guard(&factory.second(&store).await, "race", kind)),
    ];
    for run in 0..20 {
        let key = format!("op-{run}");
        let barrier = Arc::new(Barrier::new(2));
        let tasks = guards.iter().map(|g| {
            let (g, key, dest, barrier) = (g.clone(), key.clone(), dest.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                g.run(&key, &order(run), &dest).await
            })
        });
        let outcomes: Vec<Outcome> = join_all(tasks)
            .await
            .into_iter()
            .map(|o| o.unwrap().unwrap())
            .collect();
        assert_eq!(
            outcomes.iter().filter(|o| is_first_done(o)).count(),
            1,
            "run {run}: {outcomes:?}"
        );
        assert_eq!(dest.count(&key), 1, "run {run}: effects");
        let r = record(&store, "race", &key).await;
        assert_eq!(
            (r.state, r.token, r.attempts),
            (State::Completed, 2, 2),
            "run {run}"
        );
    }
}

/// A worker whose claim was taken over cannot complete: the completion is
/// refused with [`Error::LostClaim`] and the row stays as the new owner left it.
pub async fn zombie_cannot_complete<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let rescuer = Arc::new(
        guard(&factory.second(&store).await, "zombie", EffectKind::Keyed).with_owner("rescuer"),
    );
    // While the zombie acts, its lease runs out and the rescuer takes over.
    let zombie_effect = dest.clone().with_hook({
        let (store, rescuer, dest) = (store.clone(), rescuer.clone(), dest.clone());
        move |ctx| {
            let (store, rescuer, dest) = (store.clone(), rescuer.clone(), dest.clone());
            async move {
                store.clock_offset().advance(PAST_LEASE);
                let outcome = rescuer.run(&ctx.op_key, &order(1), &dest).await.unwrap();
                assert!(
                    is_first_done(&outcome),
                    "the rescuer completes: {outcome:?}"
                );
            }
        }
    });
    let zombie = guard(&store, "zombie", EffectKind::Keyed).with_owner("zombie");
    let err = zombie
        .run("op", &order(1), &zombie_effect)
        .await
        .unwrap_err();
    let Error::LostClaim {
        token,
        record: seen,
    } = err
    else {
        panic!("expected a lost claim, got {err}");
    };
    assert_eq!(token, 1, "the zombie's token");
    assert_eq!(
        (seen.state, seen.token),
        (State::Completed, 2),
        "the row as it stands"
    );
    assert_eq!(seen.owner.as_deref(), Some("rescuer"));
    assert_eq!(
        record(&store, "zombie", "op").await,
        *seen,
        "the zombie wrote nothing"
    );
    assert_eq!(
        (dest.count("op"), dest.calls("op")),
        (1, 2),
        "keyed: 1 at the destination"
    );
}

/// A failure reported after a success leaves the success standing: the
/// zombie's permanent failure arrives after the rescuer completed.
pub async fn failure_after_success_leaves_success<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let rescuer_dest = CountingEffect::keyed();
    let rescuer = Arc::new(
        guard(&factory.second(&store).await, "zombie", EffectKind::Keyed).with_owner("rescuer"),
    );
    let zombie_effect = CountingEffect::keyed().with_hook({
        let (store, rescuer, dest) = (store.clone(), rescuer.clone(), rescuer_dest.clone());
        move |ctx| {
            let (store, rescuer, dest) = (store.clone(), rescuer.clone(), dest.clone());
            async move {
                store.clock_offset().advance(PAST_LEASE);
                let outcome = rescuer.run(&ctx.op_key, &order(1), &dest).await.unwrap();
                assert!(
                    is_first_done(&outcome),
                    "the rescuer completes: {outcome:?}"
                );
            }
        }
    });
    zombie_effect.script(vec![EffectOutcome::Failed("rejected".into())]);
    let zombie = guard(&store, "zombie", EffectKind::Keyed).with_owner("zombie");
    let err = zombie
        .run("op", &order(1), &zombie_effect)
        .await
        .unwrap_err();
    let Error::LostClaim {
        token: 1,
        record: seen,
    } = err
    else {
        panic!("expected a lost claim on token 1, got {err}");
    };
    let now = record(&store, "zombie", "op").await;
    assert_eq!(now, *seen, "the zombie wrote nothing");
    assert_eq!(
        (now.state, now.token),
        (State::Completed, 2),
        "the success stands"
    );
    assert_eq!(now.external_ref.as_deref(), Some("ref-op"));
    assert_eq!(now.error, None, "the failure was not recorded");
}

/// Every fenced write naming a taken-over token changes nothing: complete,
/// fail, release, heartbeat, cancel request, take-over.
pub async fn zombie_store_writes_are_refused<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let kind = EffectKind::Keyed;
    let crash = crash_at(FaultPoint::AfterClaim);
    guard(&store, "zombie", kind)
        .with_fault_hook(crash.clone())
        .run("op", &order(1), &dest)
        .await
        .unwrap_err();
    store.clock_offset().advance(PAST_LEASE);
    let rescuer = guard(&store, "zombie", kind).with_fault_hook(crash);
    rescuer.run("op", &order(1), &dest).await.unwrap_err();
    let taken = record(&store, "zombie", "op").await;
    assert_eq!((taken.state, taken.token), (State::Claimed, 2));

    for to in [
        State::Completed,
        State::Failed,
        State::Queued,
        State::Cancelled,
    ] {
        let mut p = OpMove::new("zombie", "op", 1, State::Claimed, to);
        p.error = Some("zombie");
        assert!(
            !store.op_move(&p).await.unwrap(),
            "a move to {to} with the old token"
        );
    }
    let hb = OpHeartbeat {
        job_type: "zombie",
        op_key: "op",
        token: 1,
        lease: LEASE,
    };
    assert_eq!(
        store.op_heartbeat(&hb).await.unwrap(),
        None,
        "a heartbeat with the old token"
    );
    let rc = OpRequestCancel {
        job_type: "zombie",
        op_key: "op",
        token: 1,
    };
    assert!(
        !store.op_request_cancel(&rc).await.unwrap(),
        "a cancel request on the old token"
    );
    let p = OpTakeOver {
        job_type: "zombie",
        op_key: "op",
        stale_token: 1,
        to: State::Claimed,
        owner: "zombie",
        lease: LEASE,
        reason: "zombie",
    };
    assert_eq!(
        store.op_take_over(&p).await.unwrap(),
        None,
        "a take-over of the old token"
    );
    assert_eq!(
        record(&store, "zombie", "op").await,
        taken,
        "the row is unchanged"
    );

    let p = OpMove::new("zombie", "op", 2, State::Claimed, State::Completed);
    assert!(
        store.op_move(&p).await.unwrap(),
        "the holder of token 2 can complete"
    );
}

/// Leases are decided by the store's clock: the times a claim records come
/// from the database's clock (with its offset), not the worker's, and the
/// claim goes stale exactly when that clock passes its lease.
pub async fn database_clock_decides_leases<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let other = factory.second(&store).await;
    let skew = Duration::from_secs(3600);
    store.clock_offset().advance(skew);
    let db_now = store.now().await.unwrap();
    let worker_now = DbTime::from(SystemTime::now());
    let ahead = db_now.since(worker_now);
    assert!(
        ahead >= skew - Duration::from_secs(5) && ahead <= skew + Duration::from_secs(5),
        "{ahead:?}"
    );
    let other_now = other.now().await.unwrap();
    assert!(
        other_now.since(db_now) < Duration::from_secs(5),
        "a second worker shares the clock"
    );

    let dest = CountingEffect::keyed();
    let kind = EffectKind::Keyed;
    guard(&store, "clock", kind)
        .with_fault_hook(crash_at(FaultPoint::AfterClaim))
        .run("op", &order(1), &dest)
        .await
        .unwrap_err();
    let r = record(&store, "clock", "op").await;
    let claimed_at = r.claimed_at.expect("claimed_at");
    assert!(
        claimed_at >= db_now,
        "claimed_at {claimed_at} is on the database's clock ({db_now})"
    );
    assert!(
        claimed_at.since(db_now) < Duration::from_secs(5),
        "claimed_at {claimed_at} vs {db_now}"
    );
    assert_eq!(
        r.lease_until,
        Some(DbTime(claimed_at.0 + LEASE.as_millis() as i64))
    );

    // The worker's own clock is an hour behind; only the database's counts.
    store.clock_offset().advance(LEASE - Duration::from_secs(2));
    let outcome = guard(&other, "clock", kind)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    assert!(
        matches!(outcome, Outcome::InProgress { .. }),
        "2s before the lease ends: {outcome:?}"
    );
    store.clock_offset().advance(Duration::from_secs(3));
    let outcome = guard(&other, "clock", kind)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    assert!(
        is_first_done(&outcome),
        "1s after the lease ends: {outcome:?}"
    );
    assert_eq!(record(&store, "clock", "op").await.token, 2);
}
