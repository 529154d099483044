//! Held operations resolved by a person, fenced on the token they looked at.

use onceonly::ops::{self, Resolution};
use onceonly::{EffectKind, EffectOutcome, Error, FaultPoint, Outcome, StalePolicy, State, Store};

use super::support::{crash_at, guard, is_first_done, order, record, PAST_LEASE};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// held --resolve--> completed | queued | failed | cancelled, by a person.
pub async fn held_resolves_to_each_state<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let kind = EffectKind::Opaque(StalePolicy::Hold);
    let dest = CountingEffect::opaque();
    dest.script(vec![EffectOutcome::Unknown("timed out".into()); 4]);
    let worker = guard(&store, "held", kind);
    for key in ["completed", "queued", "failed", "cancelled"] {
        let outcome = worker.run(key, &order(1), &dest).await.unwrap();
        assert!(
            matches!(outcome, Outcome::Held { .. }),
            "{key}: {outcome:?}"
        );
    }
    let resolve = |key: &'static str, resolution: Resolution| {
        let store = store.clone();
        async move {
            ops::resolve(&store, "held", key, &resolution, "checked by hand", None)
                .await
                .unwrap()
        }
    };

    let r = resolve(
        "completed",
        Resolution::Completed {
            external_ref: Some("manual-1".into()),
        },
    )
    .await;
    assert_eq!((r.state, r.token), (State::Completed, 1));
    assert_eq!(r.external_ref.as_deref(), Some("manual-1"));
    assert!(r.completed_at.is_some());
    let outcome = worker.run("completed", &order(1), &dest).await.unwrap();
    assert!(
        matches!(&outcome, Outcome::Done { repeat: true, external_ref: Some(e), .. } if e == "manual-1"),
        "{outcome:?}"
    );

    let r = resolve("queued", Resolution::Queued).await;
    assert_eq!(r.state, State::Queued);
    let outcome = worker.run("queued", &order(1), &dest).await.unwrap();
    assert!(is_first_done(&outcome), "queued: {outcome:?}");
    assert_eq!(record(&store, "held", "queued").await.token, 2);

    assert_eq!(
        resolve("failed", Resolution::Failed).await.state,
        State::Failed
    );
    let outcome = worker.run("failed", &order(1), &dest).await.unwrap();
    assert!(
        matches!(outcome, Outcome::Failed { .. }),
        "failed: {outcome:?}"
    );

    assert_eq!(
        resolve("cancelled", Resolution::Cancelled).await.state,
        State::Cancelled
    );
    let outcome = worker.run("cancelled", &order(1), &dest).await.unwrap();
    assert!(
        matches!(outcome, Outcome::Cancelled { .. }),
        "cancelled: {outcome:?}"
    );

    let calls: Vec<u32> = ["completed", "queued", "failed", "cancelled"]
        .iter()
        .map(|k| dest.calls(k))
        .collect();
    assert_eq!(
        calls,
        [1, 2, 1, 1],
        "only the operation resolved as queued was done again"
    );
}

/// A resolve is fenced on the token the person looked at: a stale token, a
/// row that is not held, or a second resolve of the same token is refused
/// with [`Error::Moved`] and changes nothing.
pub async fn held_resolve_is_fenced<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let kind = EffectKind::Opaque(StalePolicy::Hold);
    let dest = CountingEffect::opaque();
    guard(&store, "held", kind)
        .with_fault_hook(crash_at(FaultPoint::AfterClaim))
        .run("op", &order(1), &dest)
        .await
        .unwrap_err();
    store.clock_offset().advance(PAST_LEASE);
    guard(&store, "held", kind)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    let held = record(&store, "held", "op").await;
    assert_eq!((held.state, held.token), (State::Held, 2));

    let stale = ops::resolve(&store, "held", "op", &Resolution::Queued, "stale", Some(1)).await;
    match stale {
        Err(Error::Moved {
            expected_token: 1,
            record,
        }) => assert_eq!(*record, held),
        other => panic!("a stale token must be refused, got {other:?}"),
    }
    assert_eq!(record(&store, "held", "op").await, held, "unchanged");

    // Two people resolve the same held row at once: one wins.
    let (a, b) = tokio::join!(
        ops::resolve(
            &store,
            "held",
            "op",
            &Resolution::Queued,
            "redo it",
            Some(2)
        ),
        ops::resolve(
            &store,
            "held",
            "op",
            &Resolution::Failed,
            "give up",
            Some(2)
        ),
    );
    let winner = match (&a, &b) {
        (Ok(r), Err(Error::Moved { .. })) | (Err(Error::Moved { .. }), Ok(r)) => r.state,
        _ => panic!("exactly one resolve must win: {a:?} / {b:?}"),
    };
    let now = record(&store, "held", "op").await;
    assert_eq!(now.state, winner);

    let again = ops::resolve(&store, "held", "op", &Resolution::Cancelled, "late", None).await;
    assert!(
        matches!(again, Err(Error::Moved { .. })),
        "a row no longer held: {again:?}"
    );
    assert_eq!(record(&store, "held", "op").await, now, "unchanged");
    let missing = ops::resolve(&store, "held", "nope", &Resolution::Failed, "?", None).await;
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
}
