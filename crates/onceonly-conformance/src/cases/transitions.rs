//! The transitions of docs/DESIGN.md section 2, one case each (cancel has its
//! own module).

use std::time::Duration;

use onceonly::ops::{self, EnqueueOutcome};
use onceonly::{
    EffectKind, EffectOutcome, Error, FaultPoint, Move, Outcome, StalePolicy, State, Store,
};
use serde_json::json;

use super::support::{
    crash_at, guard, is_first_done, job_for, order, record, spec, LEASE, PAST_LEASE, REMOTE_KINDS,
    RETRY_BACKOFF,
};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// (none) --claim--> claimed: the first delivery inserts the record claimed,
/// with token 1, its owner, its lease on the database's clock and its payload.
pub async fn claim_inserts_claimed_record<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let dying =
        guard(&store, "send", EffectKind::Keyed).with_fault_hook(crash_at(FaultPoint::AfterClaim));
    let before = store.now().await.unwrap();
    dying.run("op", &order(1), &dest).await.unwrap_err();
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Claimed, 1, 1));
    assert_eq!(r.owner.as_deref(), Some(dying.owner()));
    assert_eq!(r.fingerprint, order(1).fingerprint);
    assert_eq!(r.payload, order(1).json);
    let claimed_at = r.claimed_at.expect("claimed_at");
    assert!(
        claimed_at >= before,
        "claimed_at {claimed_at} before {before}"
    );
    assert_eq!(
        r.lease_until,
        Some(onceonly::DbTime(claimed_at.0 + LEASE.as_millis() as i64))
    );
    assert!(!r.cancel_requested);
    assert_eq!(
        (r.external_ref, r.result, r.error, r.completed_at),
        (None, None, None, None)
    );
    assert_eq!(dest.calls("op"), 0, "crashed before the effect");

    // A second claim conflicts: the claim is not yours.
    let outcome = guard(&store, "send", EffectKind::Keyed)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::InProgress { .. }), "{outcome:?}");
    assert_eq!(record(&store, "send", "op").await.token, 1);
}

/// queued --claim--> claimed: an enqueued operation is claimed by the first
/// delivery (token 1), not before its due time.
pub async fn queued_operation_is_claimed<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let kind = EffectKind::Keyed;
    let queued = ops::enqueue(&store, "send", "op", &order(1), None)
        .await
        .unwrap();
    assert_eq!(queued, EnqueueOutcome::Queued);
    let r = record(&store, "send", "op").await;
    assert_eq!(
        (r.state, r.token, r.attempts, r.owner),
        (State::Queued, 0, 0, None)
    );

    let dying = guard(&store, "send", kind).with_fault_hook(crash_at(FaultPoint::AfterClaim));
    dying.run("op", &order(1), &dest).await.unwrap_err();
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Claimed, 1, 1));
    assert_eq!(r.owner.as_deref(), Some(dying.owner()));

    ops::enqueue(
        &store,
        "send",
        "later",
        &order(2),
        Some(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let worker = guard(&store, "send", kind);
    let outcome = worker.run("later", &order(2), &dest).await.unwrap();
    assert!(
        matches!(outcome, Outcome::NotDue { due_at: Some(_) }),
        "{outcome:?}"
    );
    assert_eq!(record(&store, "send", "later").await.state, State::Queued);
    assert_eq!(dest.calls("later"), 0);
    store.clock_offset().advance(Duration::from_secs(61));
    let outcome = worker.run("later", &order(2), &dest).await.unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    let r = record(&store, "send", "later").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Completed, 1, 1));
    assert_eq!(dest.count("later"), 1);
}

/// claimed --complete--> completed: the result and reference are recorded
/// under the token, and every repeat gets them back without acting.
pub async fn completion_records_result_and_reference<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.script(vec![EffectOutcome::Done {
        external_ref: Some("msg-77".into()),
        result: json!({ "id": 77 }),
    }]);
    let worker = guard(&store, "send", EffectKind::Keyed);
    let expected = |repeat| Outcome::Done {
        result: json!({ "id": 77 }),
        external_ref: Some("msg-77".into()),
        repeat,
    };
    assert_eq!(
        worker.run("op", &order(1), &dest).await.unwrap(),
        expected(false)
    );
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Completed, 1));
    assert_eq!(r.external_ref.as_deref(), Some("msg-77"));
    assert_eq!(r.result_value(), json!({ "id": 77 }));
    assert!(r.completed_at.is_some());
    assert_eq!((r.lease_until, r.error), (None, None));
    assert_eq!(
        worker.run("op", &order(1), &dest).await.unwrap(),
        expected(true)
    );
    assert_eq!(dest.calls("op"), 1, "the repeat did not act");
}

/// claimed --release--> queued: an effect surely not sent releases the claim
/// once retries under it are used up; the next delivery does it.
pub async fn not_sent_releases_the_claim<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.script(vec![EffectOutcome::NotSent("connection refused".into())]);
    let mut no_retries = spec("send", EffectKind::Keyed);
    no_retries.max_retries = 0;
    let worker = onceonly::Guard::new(store.clone(), no_retries).unwrap();
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert_eq!(
        outcome,
        Outcome::RetryLater {
            reason: "connection refused".into()
        }
    );
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Queued, 1, 1));
    assert_eq!(r.error.as_deref(), Some("connection refused"));
    assert_eq!(r.lease_until, None);
    assert_eq!((dest.calls("op"), dest.count("op")), (1, 0));

    // A released operation backs off before it is due again.
    let early = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(early, Outcome::NotDue { .. }), "{early:?}");
    assert_eq!(dest.calls("op"), 1, "not retried before its backoff");
    store.clock_offset().advance(RETRY_BACKOFF);
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Completed, 2, 2));
    assert_eq!(dest.count("op"), 1);

    // With retries left, not-sent is retried under the same claim.
    let retried = CountingEffect::keyed();
    retried.script(vec![
        EffectOutcome::NotSent("refused".into()),
        EffectOutcome::NotSent("refused".into()),
    ]);
    let outcome = guard(&store, "send", EffectKind::Keyed)
        .run("retried", &order(2), &retried)
        .await
        .unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    assert_eq!((retried.calls("retried"), retried.count("retried")), (3, 1));
    let r = record(&store, "send", "retried").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Completed, 1, 1));
}

/// claimed --fail--> failed: a permanent failure fails the record; repeats
/// report it without acting.
pub async fn permanent_failure_fails_the_record<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.script(vec![EffectOutcome::Failed("400 bad request".into())]);
    let worker = guard(&store, "send", EffectKind::Keyed);
    let expected = Outcome::Failed {
        error: Some("400 bad request".into()),
    };
    assert_eq!(worker.run("op", &order(1), &dest).await.unwrap(), expected);
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Failed, 1));
    assert_eq!(r.error.as_deref(), Some("400 bad request"));
    assert_eq!(worker.run("op", &order(1), &dest).await.unwrap(), expected);
    assert_eq!(
        (dest.calls("op"), dest.count("op")),
        (1, 0),
        "one attempt, no effect"
    );
}

/// A failure write never touches completed: a move from claimed to failed
/// naming the completed row's token changes nothing.
pub async fn failure_write_never_touches_completed<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    guard(&store, "send", EffectKind::Keyed)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    let done = record(&store, "send", "op").await;
    assert_eq!(done.state, State::Completed);
    for token in [done.token, done.token + 1] {
        let p = Move::Fail
            .op("send", "op", token)
            .with_error("late failure");
        assert!(
            !store.op_move(&p).await.unwrap(),
            "token {token}: the move changed a completed row"
        );
    }
    assert_eq!(
        record(&store, "send", "op").await,
        done,
        "the completed row is unchanged"
    );
}

/// An unknown outcome seen by a live worker: keyed and lookup retry under
/// the claim (lookup looks first); opaque applies its policy at once.
pub async fn unknown_outcome_follows_the_kind<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let unknown = || EffectOutcome::Unknown("read timed out".into());
    for kind in REMOTE_KINDS {
        let job = job_for(kind);
        let dest = if kind == EffectKind::Keyed {
            CountingEffect::keyed()
        } else {
            CountingEffect::opaque()
        };
        dest.script(vec![unknown()]);
        let outcome = guard(&store, &job, kind)
            .run("op", &order(1), &dest)
            .await
            .unwrap();
        let r = record(&store, &job, "op").await;
        let (state, calls) = match kind {
            EffectKind::Keyed => (State::Completed, 2),
            EffectKind::Lookup => (State::Completed, 1),
            EffectKind::Opaque(StalePolicy::Hold) => (State::Held, 1),
            EffectKind::Opaque(StalePolicy::AtLeastOnce) => (State::Queued, 1),
            _ => (State::Failed, 1),
        };
        assert_eq!((r.state, r.token), (state, 1), "{kind}: {outcome:?}");
        assert_eq!(dest.calls("op"), calls, "{kind}: calls");
        assert_eq!(dest.count("op"), 1, "{kind}: effects");
    }

    // At-least-once redoes once; a second unknown is held: at most 1 extra.
    let kind = EffectKind::Opaque(StalePolicy::AtLeastOnce);
    let dest = CountingEffect::opaque();
    dest.script(vec![unknown(), unknown()]);
    let worker = guard(&store, "alo", kind);
    let first = worker.run("twice", &order(1), &dest).await.unwrap();
    assert!(matches!(first, Outcome::RetryLater { .. }), "{first:?}");
    store.clock_offset().advance(RETRY_BACKOFF);
    let second = worker.run("twice", &order(1), &dest).await.unwrap();
    assert!(matches!(second, Outcome::Held { .. }), "{second:?}");
    assert_eq!(dest.count("twice"), 2, "at most 1 extra");
    let r = record(&store, "alo", "twice").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Held, 2, 2));
}

/// claimed, lease over --take over--> claimed | held | failed: the new
/// token is the old one + 1 and the state is the policy's.
pub async fn stale_take_over_moves_by_policy<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let crash = crash_at(FaultPoint::AfterClaim);
    for kind in REMOTE_KINDS {
        let job = job_for(kind);
        guard(&store, &job, kind)
            .with_fault_hook(crash.clone())
            .run("op", &order(1), &dest)
            .await
            .unwrap_err();
    }
    store.clock_offset().advance(PAST_LEASE);
    for kind in REMOTE_KINDS {
        let job = job_for(kind);
        // The taker crashes right after a redo claim, so the claim itself shows.
        let taker = guard(&store, &job, kind).with_fault_hook(crash.clone());
        let outcome = taker.run("op", &order(1), &dest).await;
        let r = record(&store, &job, "op").await;
        let (state, attempts) = match kind {
            EffectKind::Opaque(StalePolicy::Hold) => (State::Held, 1),
            EffectKind::Opaque(StalePolicy::AtMostOnce) => (State::Failed, 1),
            _ => (State::Claimed, 2),
        };
        assert_eq!(
            (r.state, r.token, r.attempts),
            (state, 2, attempts),
            "{kind}: {outcome:?}"
        );
        assert_eq!(
            r.owner.as_deref(),
            Some(taker.owner()),
            "{kind}: the taker's"
        );
        assert!(r.error.is_some(), "{kind}: the take-over says why");
        match state {
            State::Claimed => {
                assert!(
                    matches!(outcome, Err(Error::InjectedCrash(_))),
                    "{kind}: {outcome:?}"
                );
                let live_from = r.claimed_at.expect("claimed_at").0;
                assert_eq!(
                    r.lease_until.map(|t| t.0 - live_from),
                    Some(LEASE.as_millis() as i64)
                );
            }
            _ => assert_eq!(r.lease_until, None, "{kind}"),
        }
    }
    assert_eq!(dest.calls("op"), 0, "nobody acted");
}
