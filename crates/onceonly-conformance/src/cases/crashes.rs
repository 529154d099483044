//! Crashes: a worker dies after the claim or after the effect, and the
//! operation is delivered again after the lease. Each effect kind keeps the
//! promise of docs/DESIGN.md section 3, counted at the destination.

use onceonly::{EffectKind, Error, FaultPoint, Outcome, Record, StalePolicy, State, Store};

use super::support::{crash_at, guard, is_first_done, local_write, order, record, PAST_LEASE};
use crate::effects::CountingEffect;
use crate::StoreFactory;

const JOB: &str = "crash";

/// Delivers `key` on a worker that crashes at `point`, checks the row is
/// left claimed, moves the database's clock past the lease and delivers
/// again on a second worker. Returns what the redelivery said and the row.
async fn crash_and_redeliver<F: StoreFactory>(
    factory: &F,
    store: &F::S,
    kind: EffectKind,
    point: FaultPoint,
    key: &str,
    dest: &CountingEffect,
) -> (Outcome, Record) {
    let dying = guard(store, JOB, kind).with_fault_hook(crash_at(point));
    match dying.run(key, &order(1), dest).await {
        Err(Error::InjectedCrash(at)) => assert_eq!(at, point),
        other => panic!("{kind} {point}: expected the injected crash, got {other:?}"),
    }
    let left = record(store, JOB, key).await;
    assert_eq!(
        left.state,
        State::Claimed,
        "{kind} {point}: the crash leaves the claim"
    );
    assert_eq!(left.token, 1);
    assert_eq!(left.owner.as_deref(), Some(dying.owner()));

    store.clock_offset().advance(PAST_LEASE);
    let other = factory.second(store).await;
    let outcome = guard(&other, JOB, kind)
        .run(key, &order(1), dest)
        .await
        .unwrap();
    (outcome, record(store, JOB, key).await)
}

fn assert_completed_by_takeover(kind: EffectKind, outcome: &Outcome, r: &Record) {
    assert!(is_first_done(outcome), "{kind} {}: {outcome:?}", r.op_key);
    assert_eq!(
        (r.state, r.token, r.attempts),
        (State::Completed, 2, 2),
        "{kind} {}",
        r.op_key
    );
}

/// Keyed: the redo carries the same idempotency key, so the destination
/// holds 1 effect after either crash.
pub async fn crash_keyed_once_at_destination<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let kind = EffectKind::Keyed;

    let (outcome, r) =
        crash_and_redeliver(factory, &store, kind, FaultPoint::AfterClaim, "a", &dest).await;
    assert_completed_by_takeover(kind, &outcome, &r);
    assert_eq!(
        (dest.count("a"), dest.calls("a")),
        (1, 1),
        "after-claim crash: effects, calls"
    );

    let (outcome, r) =
        crash_and_redeliver(factory, &store, kind, FaultPoint::AfterEffect, "b", &dest).await;
    assert_completed_by_takeover(kind, &outcome, &r);
    assert_eq!(
        dest.calls("b"),
        2,
        "after-effect crash: the redo reached the destination"
    );
    assert_eq!(
        dest.count("b"),
        1,
        "after-effect crash: the destination deduplicated it"
    );

    let again = guard(&store, JOB, kind)
        .run("b", &order(1), &dest)
        .await
        .unwrap();
    assert!(
        matches!(again, Outcome::Done { repeat: true, .. }),
        "{again:?}"
    );
    assert_eq!(dest.calls("b"), 2, "a repeat does not act");
}

/// Lookup: the redo looks the effect up first: found, it completes with the
/// reference; not found, it does it. 1 effect either way.
pub async fn crash_lookup_once<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    // No dedup: a redo that skipped the lookup would show as 2.
    let dest = CountingEffect::opaque();
    let kind = EffectKind::Lookup;

    let (outcome, r) =
        crash_and_redeliver(factory, &store, kind, FaultPoint::AfterClaim, "a", &dest).await;
    assert_completed_by_takeover(kind, &outcome, &r);
    assert_eq!(
        (dest.count("a"), dest.calls("a")),
        (1, 1),
        "after-claim crash: effects, calls"
    );

    let (outcome, r) =
        crash_and_redeliver(factory, &store, kind, FaultPoint::AfterEffect, "b", &dest).await;
    assert_completed_by_takeover(kind, &outcome, &r);
    assert_eq!(
        (dest.count("b"), dest.calls("b")),
        (1, 1),
        "after-effect crash: found, not redone"
    );
    assert_eq!(
        r.external_ref.as_deref(),
        Some("ref-b"),
        "completed with the reference found"
    );
}

/// Opaque under hold: no redo after either crash (0 extra effects); the
/// record is held for a person.
pub async fn crash_opaque_hold_no_extra<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    let kind = EffectKind::Opaque(StalePolicy::Hold);

    for (point, key, done) in [
        (FaultPoint::AfterClaim, "a", 0),
        (FaultPoint::AfterEffect, "b", 1),
    ] {
        let (outcome, r) = crash_and_redeliver(factory, &store, kind, point, key, &dest).await;
        assert!(
            matches!(outcome, Outcome::Held { reason: Some(_) }),
            "{point}: {outcome:?}"
        );
        assert_eq!(
            (r.state, r.token, r.attempts),
            (State::Held, 2, 1),
            "{point}"
        );
        assert_eq!(dest.count(key), done, "{point}: effects (0 extra)");
        assert_eq!(dest.calls(key), done, "{point}: calls");
        let again = guard(&store, JOB, kind)
            .run(key, &order(1), &dest)
            .await
            .unwrap();
        assert!(
            matches!(again, Outcome::Held { .. }),
            "{point}: stays held: {again:?}"
        );
        assert_eq!(
            dest.calls(key),
            done,
            "{point}: a held operation is not redone"
        );
    }
}

/// Opaque under at-least-once: redone after either crash, at most 1 extra
/// effect: 1 after the claim, 2 after the effect; a redo that also crashes
/// is held, not redone again.
pub async fn crash_opaque_at_least_once_one_extra<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    let kind = EffectKind::Opaque(StalePolicy::AtLeastOnce);

    let (outcome, r) =
        crash_and_redeliver(factory, &store, kind, FaultPoint::AfterClaim, "a", &dest).await;
    assert_completed_by_takeover(kind, &outcome, &r);
    assert_eq!(dest.count("a"), 1, "after-claim crash: effects");

    let (outcome, r) =
        crash_and_redeliver(factory, &store, kind, FaultPoint::AfterEffect, "b", &dest).await;
    assert_completed_by_takeover(kind, &outcome, &r);
    assert_eq!(dest.count("b"), 2, "after-effect crash: 1 extra effect");

    // Crash after the effect, then the redo crashes after the effect too.
    let dying = guard(&store, JOB, kind).with_fault_hook(crash_at(FaultPoint::AfterEffect));
    for attempt in 1..=2 {
        let err = dying.run("c", &order(1), &dest).await.unwrap_err();
        assert!(
            matches!(err, Error::InjectedCrash(FaultPoint::AfterEffect)),
            "attempt {attempt}: {err}"
        );
        store.clock_offset().advance(PAST_LEASE);
    }
    assert_eq!(dest.count("c"), 2, "two crashed attempts acted");
    let outcome = guard(&store, JOB, kind)
        .run("c", &order(1), &dest)
        .await
        .unwrap();
    assert!(
        matches!(outcome, Outcome::Held { .. }),
        "a second stale redo is held: {outcome:?}"
    );
    assert_eq!(dest.count("c"), 2, "at most 1 extra effect");
    assert_eq!(record(&store, JOB, "c").await.state, State::Held);
}

/// Opaque under at-most-once: never redone; the record fails (after the
/// claim the effect is missing, after the effect it happened once).
pub async fn crash_opaque_at_most_once_no_redo<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    let kind = EffectKind::Opaque(StalePolicy::AtMostOnce);

    for (point, key, done) in [
        (FaultPoint::AfterClaim, "a", 0),
        (FaultPoint::AfterEffect, "b", 1),
    ] {
        let (outcome, r) = crash_and_redeliver(factory, &store, kind, point, key, &dest).await;
        assert!(
            matches!(outcome, Outcome::Failed { error: Some(_) }),
            "{point}: {outcome:?}"
        );
        assert_eq!(
            (r.state, r.token, r.attempts),
            (State::Failed, 2, 1),
            "{point}"
        );
        assert_eq!(dest.count(key), done, "{point}: effects");
        let again = guard(&store, JOB, kind)
            .run(key, &order(1), &dest)
            .await
            .unwrap();
        assert!(
            matches!(again, Outcome::Failed { .. }),
            "{point}: stays failed: {again:?}"
        );
        assert_eq!(dest.count(key), done, "{point}: never redone");
    }
}

/// Local: a crash rolls the claim back with the effect's own write; the
/// redelivery writes the one row. Exactly 1 row after either crash.
pub async fn crash_local_exactly_once<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    factory.local_table(&store).await;
    for (point, key) in [
        (FaultPoint::AfterClaim, "a"),
        (FaultPoint::AfterEffect, "b"),
    ] {
        let dying = guard(&store, JOB, EffectKind::Local).with_fault_hook(crash_at(point));
        match dying.run_local(key, &order(1), local_write::<F>()).await {
            Err(Error::InjectedCrash(at)) => assert_eq!(at, point),
            other => panic!("{point}: expected the injected crash, got {other:?}"),
        }
        assert_eq!(
            factory.local_count(&store, key).await,
            0,
            "{point}: the write rolled back"
        );
        let left = store.op_get(JOB, key).await.unwrap();
        assert!(
            left.is_none(),
            "{point}: the claim rolled back with it: {left:?}"
        );

        store.clock_offset().advance(PAST_LEASE);
        let other = factory.second(&store).await;
        let outcome = guard(&other, JOB, EffectKind::Local)
            .run_local(key, &order(1), local_write::<F>())
            .await
            .unwrap();
        assert!(is_first_done(&outcome), "{point}: {outcome:?}");
        assert_eq!(
            factory.local_count(&store, key).await,
            1,
            "{point}: rows written"
        );
        let r = record(&store, JOB, key).await;
        assert_eq!(
            (r.state, r.token, r.attempts),
            (State::Completed, 1, 1),
            "{point}"
        );
    }
}
