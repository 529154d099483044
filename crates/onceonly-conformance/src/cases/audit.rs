//! The audit trail: every exceptional transition and every release of a
//! claim appends exactly one event with its actor, token and states, oldest
//! first; the happy path (claim, completion) appends none, and a refused
//! write appends none.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use onceonly::ops::{self, CancelOutcome, Resolution};
use onceonly::store::OpClaimBatch;
use onceonly::{
    AuditEvent, AuditKind, EffectKind, EffectOutcome, Error, FaultPoint, Outcome, StalePolicy,
    State, Store,
};

use super::support::{
    crash_at, guard, is_first_done, job_for, order, record, LEASE, PAST_LEASE, REMOTE_KINDS,
    RETRY_BACKOFF,
};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// One event as the cases compare it: kind, actor, token, from, to.
type Seen = (AuditKind, String, i64, Option<State>, Option<State>);

/// The operation's trail, checked to be in append order by id and time.
async fn history<S: Store>(store: &S, job: &str, key: &str) -> Vec<AuditEvent> {
    let events = store.op_history(job, key).await.unwrap();
    for pair in events.windows(2) {
        assert!(
            pair[0].id < pair[1].id && pair[0].at <= pair[1].at,
            "{job}:{key}: oldest first: {events:?}"
        );
    }
    for e in &events {
        assert_eq!((e.job_type.as_str(), e.op_key.as_str()), (job, key));
    }
    events
}

/// The trail as [`Seen`] tuples.
async fn seen<S: Store>(store: &S, job: &str, key: &str) -> Vec<Seen> {
    history(store, job, key)
        .await
        .into_iter()
        .map(|e| (e.event, e.actor, e.token, e.from_state, e.to_state))
        .collect()
}

fn ev(kind: AuditKind, actor: &str, token: i64, from: State, to: State) -> Seen {
    (kind, actor.to_owned(), token, Some(from), Some(to))
}

/// A claim, a completion, a repeat, a relay's batch claim and completion:
/// none of them writes to the audit trail.
pub async fn happy_path_writes_no_audit<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let worker = guard(&store, "send", EffectKind::Keyed).with_owner("w");
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::Done { repeat: true, .. }));
    assert_eq!(
        history(&store, "send", "op").await,
        [],
        "claim and completion"
    );

    ops::enqueue(&store, "send", "queued", &order(3), None)
        .await
        .unwrap();
    let (record, claim) = claim_one(&store, "queued").await;
    let outcome = worker.run_claimed(&record, &claim, &dest).await.unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    assert_eq!(
        history(&store, "send", "queued").await,
        [],
        "enqueue and relay"
    );
}

/// The release of a claim for another try, as `(event, attempt, detail,
/// retry after ms)`.
type Release = (AuditKind, Option<i64>, Option<String>, Option<i64>);

fn releases(events: &[AuditEvent]) -> Vec<Release> {
    events
        .iter()
        .map(|e| (e.event, e.attempt, e.detail.clone(), e.retry_after_ms))
        .collect()
}

fn retry(attempt: i64, reason: &str, after_ms: i64) -> Release {
    let reason = Some(reason.to_owned());
    (AuditKind::Retry, Some(attempt), reason, Some(after_ms))
}

/// Every claim released for another try appends one `retry` with the
/// attempt it ended, the reason and the backoff, claimed to queued under the
/// claim's token, whether the guard claimed it or a relay's batch did; the
/// completion after them appends nothing.
pub async fn retries_are_audited<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let worker = guard(&store, "send", EffectKind::Keyed).with_owner("w");
    let tries = worker.spec().max_retries as usize + 1;
    let not_sent = |why: &str| vec![EffectOutcome::NotSent(why.into()); tries];
    dest.script(
        [
            not_sent("connection refused"),
            not_sent("503 from the destination"),
        ]
        .concat(),
    );
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    store.clock_offset().advance(RETRY_BACKOFF);
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    store.clock_offset().advance(RETRY_BACKOFF * 2);
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(is_first_done(&outcome), "{outcome:?}");
    let events = history(&store, "send", "op").await;
    assert_eq!(
        releases(&events),
        [
            retry(1, "connection refused", 500),
            retry(2, "503 from the destination", 1000)
        ],
        "two retries, then the completion, which writes nothing"
    );
    let claimed_queued = (Some(State::Claimed), Some(State::Queued));
    for (e, token) in events.iter().zip([1, 2]) {
        assert_eq!((e.actor.as_str(), e.token), ("w", token), "{e:?}");
        assert_eq!((e.from_state, e.to_state), claimed_queued, "{e:?}");
    }

    // The relay's path: a batch claim, the effect under it, the release.
    ops::enqueue(&store, "send", "queued", &order(2), None)
        .await
        .unwrap();
    dest.script(not_sent("timed out connecting"));
    let (record, claim) = claim_one(&store, "queued").await;
    let outcome = worker.run_claimed(&record, &claim, &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    let events = history(&store, "send", "queued").await;
    assert_eq!(releases(&events), [retry(1, "timed out connecting", 500)]);

    // A claim given back unstarted (a relay stopping) is no failed try: its
    // own event, due at once.
    store.clock_offset().advance(RETRY_BACKOFF);
    let (record, claim) = claim_one(&store, "queued").await;
    let stopping = "released unstarted at relay shutdown";
    let outcome = worker
        .release_unstarted(&record, &claim, stopping)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    let events = history(&store, "send", "queued").await;
    let released = (AuditKind::Released, Some(2), Some(stopping.into()), Some(0));
    assert_eq!(
        releases(&events),
        [retry(1, "timed out connecting", 500), released]
    );
    assert_eq!(
        dest.calls("queued"),
        tries as u32,
        "the unstarted claim never acted"
    );
}

/// A running relay: a try not sent appends a `retry` (then the next claim
/// completes, appending nothing); a claim it gives back unstarted as it
/// stops appends a `released`, due at once.
pub async fn relay_retries_and_shutdown_are_audited<F: StoreFactory>(factory: &F) {
    use onceonly::relay::{Relay, RelayConfig};

    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let worker = guard(&store, "send", EffectKind::Keyed).with_owner("relay");
    let tries = worker.spec().max_retries as usize + 1;
    dest.script(vec![
        EffectOutcome::NotSent("connection refused".into());
        tries
    ]);
    ops::enqueue(&store, "send", "op", &order(1), None)
        .await
        .unwrap();
    let config = RelayConfig {
        workers: 1,
        poll: std::time::Duration::from_millis(20),
        drain: true,
        ..RelayConfig::default()
    };
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    // Drains once the retry (due after its 500ms backoff) is done.
    Relay::new(&worker, &dest, config.clone())
        .run(stop)
        .await
        .unwrap();
    assert_eq!(record(&store, "send", "op").await.state, State::Completed);
    let events = history(&store, "send", "op").await;
    assert_eq!(releases(&events), [retry(1, "connection refused", 500)]);
    assert_eq!(events[0].actor, "relay");

    // Stopped right after a batch claim: the claim goes back unstarted.
    ops::enqueue(&store, "send", "unstarted", &order(2), None)
        .await
        .unwrap();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let relay_store = super::intercept::Intercept {
        after_claim_batch: Arc::new(move |_claimed| {
            let stop_tx = stop_tx.clone();
            Box::pin(async move {
                stop_tx.send_replace(true);
            }) as futures::future::BoxFuture<'static, ()>
        }),
        ..super::intercept::Intercept::new(store.clone())
    };
    let stopping = guard(&relay_store, "send", EffectKind::Keyed).with_owner("relay");
    let config = RelayConfig {
        drain: false,
        ..config
    };
    Relay::new(&stopping, &dest, config)
        .run(stop)
        .await
        .unwrap();
    assert_eq!(
        dest.calls("unstarted"),
        0,
        "the relay stopped before acting"
    );
    let events = history(&store, "send", "unstarted").await;
    let reason = "released unstarted at relay shutdown";
    assert_eq!(
        releases(&events),
        [(AuditKind::Released, Some(1), Some(reason.into()), Some(0))]
    );
}

/// The relay's batch claim of one due operation, `op_key`.
async fn claim_one<S: Store>(
    store: &S,
    op_key: &str,
) -> (onceonly::Record, onceonly::store::Claim) {
    let batch = store
        .op_claim_batch(&OpClaimBatch {
            job_type: "send",
            owner: "relay",
            lease: LEASE,
            limit: 10,
        })
        .await
        .unwrap();
    batch
        .into_iter()
        .find(|(r, _)| r.op_key == op_key)
        .expect("the due operation is claimed")
}

/// A take-over past the lease appends one `take_over` under the new token,
/// by the worker that took over, to the state its policy chose.
pub async fn take_over_is_audited_by_policy<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let other = factory.second(&store).await;
    let dest = CountingEffect::opaque();
    for kind in REMOTE_KINDS {
        let dying = guard(&store, &job_for(kind), kind)
            .with_owner("dying")
            .with_fault_hook(crash_at(FaultPoint::AfterClaim));
        dying.run("op", &order(1), &dest).await.unwrap_err();
    }
    store.clock_offset().advance(PAST_LEASE);
    for kind in REMOTE_KINDS {
        let job = job_for(kind);
        guard(&other, &job, kind)
            .with_owner("rescuer")
            .run("op", &order(1), &dest)
            .await
            .unwrap();
        let to = match kind {
            EffectKind::Opaque(StalePolicy::Hold) => State::Held,
            EffectKind::Opaque(StalePolicy::AtMostOnce) => State::Failed,
            _ => State::Claimed,
        };
        let events = history(&store, &job, "op").await;
        let got: Vec<Seen> = events
            .iter()
            .map(|e| (e.event, e.actor.clone(), e.token, e.from_state, e.to_state))
            .collect();
        assert_eq!(
            got,
            [ev(AuditKind::TakeOver, "rescuer", 2, State::Claimed, to)],
            "{kind}: one take-over, nothing for the redo's completion"
        );
        let detail = events[0].detail.as_deref().unwrap_or_default();
        assert!(detail.contains("stale token 1"), "{kind}: {detail}");
    }
}

/// A permanent failure appends `failed`; an unknown outcome held by the
/// owner appends `hold`; both by the owner, under its token.
pub async fn permanent_failure_and_hold_are_audited<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.script(vec![EffectOutcome::Failed("card declined".into())]);
    let outcome = guard(&store, "send", EffectKind::Keyed)
        .with_owner("w")
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
    let events = history(&store, "send", "op").await;
    assert_eq!(
        seen(&store, "send", "op").await,
        [ev(AuditKind::Failed, "w", 1, State::Claimed, State::Failed)]
    );
    assert_eq!(events[0].detail.as_deref(), Some("card declined"));

    let opaque = CountingEffect::opaque();
    opaque.script(vec![EffectOutcome::Unknown("timed out".into())]);
    let outcome = guard(&store, "mail", EffectKind::Opaque(StalePolicy::Hold))
        .with_owner("w")
        .run("op", &order(1), &opaque)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Held { .. }), "{outcome:?}");
    assert_eq!(
        seen(&store, "mail", "op").await,
        [ev(AuditKind::Hold, "w", 1, State::Claimed, State::Held)]
    );
}

/// A worker whose claim was taken over appends `lost_claim` with the token
/// it held and the row's state as it now stands, after the take-over.
pub async fn lost_claim_is_audited<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let rescuer = Arc::new(
        guard(&factory.second(&store).await, "zombie", EffectKind::Keyed).with_owner("rescuer"),
    );
    let zombie_effect = dest.clone().with_hook({
        let (store, rescuer, dest) = (store.clone(), rescuer.clone(), dest.clone());
        move |ctx| {
            let (store, rescuer, dest) = (store.clone(), rescuer.clone(), dest.clone());
            async move {
                store.clock_offset().advance(PAST_LEASE);
                rescuer.run(&ctx.op_key, &order(1), &dest).await.unwrap();
            }
        }
    });
    let err = guard(&store, "zombie", EffectKind::Keyed)
        .with_owner("zombie")
        .run("op", &order(1), &zombie_effect)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LostClaim { token: 1, .. }), "{err}");
    assert_eq!(
        seen(&store, "zombie", "op").await,
        [
            ev(
                AuditKind::TakeOver,
                "rescuer",
                2,
                State::Claimed,
                State::Claimed
            ),
            ev(
                AuditKind::LostClaim,
                "zombie",
                1,
                State::Claimed,
                State::Completed
            ),
        ]
    );
}

/// Cancels by an operator: of a queued, a failed and a completed (withdrawn)
/// operation each append `cancelled` from that state; of a live claim,
/// `cancel_requested`. The actor is the one named to `cancel_as`.
pub async fn cancels_are_audited<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let none: Option<&CountingEffect> = None;

    ops::enqueue(&store, "send", "queued", &order(1), None)
        .await
        .unwrap();
    ops::cancel_as(&store, "send", "queued", none, "alice")
        .await
        .unwrap();
    assert_eq!(
        seen(&store, "send", "queued").await,
        [ev(
            AuditKind::Cancelled,
            "alice",
            0,
            State::Queued,
            State::Cancelled
        )]
    );

    dest.script(vec![EffectOutcome::Failed("rejected".into())]);
    let worker = guard(&store, "send", EffectKind::Keyed).with_owner("w");
    worker.run("failed", &order(2), &dest).await.unwrap();
    ops::cancel_as(&store, "send", "failed", Some(&dest), "alice")
        .await
        .unwrap();
    assert_eq!(
        seen(&store, "send", "failed").await,
        [
            ev(AuditKind::Failed, "w", 1, State::Claimed, State::Failed),
            ev(
                AuditKind::Cancelled,
                "alice",
                1,
                State::Failed,
                State::Cancelled
            ),
        ]
    );

    worker.run("done", &order(3), &dest).await.unwrap();
    let out = ops::cancel_as(&store, "send", "done", Some(&dest), "alice")
        .await
        .unwrap();
    assert!(matches!(out, CancelOutcome::Cancelled { .. }), "{out:?}");
    assert_eq!(
        seen(&store, "send", "done").await,
        [ev(
            AuditKind::Cancelled,
            "alice",
            1,
            State::Completed,
            State::Cancelled
        )]
    );

    // Not withdrawn: it stays completed, and nothing is appended.
    worker.run("live", &order(4), &dest).await.unwrap();
    let out = ops::cancel_as(&store, "send", "live", none, "alice")
        .await
        .unwrap();
    assert!(matches!(out, CancelOutcome::StillLive { .. }), "{out:?}");
    assert_eq!(history(&store, "send", "live").await, []);

    let payload = order(5);
    let claim = onceonly::store::OpClaim {
        job_type: "send",
        op_key: "claimed",
        fingerprint: &payload.fingerprint,
        payload: payload.json.as_deref(),
        owner: "w",
        lease: LEASE,
    };
    store.op_claim(&claim).await.unwrap();
    let out = ops::cancel_as(&store, "send", "claimed", none, "alice")
        .await
        .unwrap();
    assert!(matches!(out, CancelOutcome::Requested { .. }), "{out:?}");
    assert_eq!(
        seen(&store, "send", "claimed").await,
        [ev(
            AuditKind::CancelRequested,
            "alice",
            1,
            State::Claimed,
            State::Claimed
        )]
    );
}

/// A clone of `dest` whose first `perform` has `actor` ask to cancel.
fn cancelling<S: Store + Clone>(
    dest: &CountingEffect,
    store: &S,
    actor: &'static str,
) -> CountingEffect {
    let (store, first) = (store.clone(), Arc::new(AtomicBool::new(true)));
    dest.clone().with_hook(move |ctx| {
        let (store, first) = (store.clone(), first.clone());
        async move {
            if first.swap(false, Ordering::SeqCst) {
                let none: Option<&CountingEffect> = None;
                ops::cancel_as(&store, &ctx.job_type, &ctx.op_key, none, actor)
                    .await
                    .unwrap();
            }
        }
    })
}

/// A cancel requested while the effect ran: the owner withdraws it
/// (`compensated`), or the withdraw fails (`withdraw_failed`, still
/// completed); each after the operator's `cancel_requested`.
pub async fn compensation_is_audited<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let worker = guard(&store, "send", EffectKind::Keyed).with_owner("w");
    let outcome = worker
        .run("op", &order(1), &cancelling(&dest, &store, "alice"))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Cancelled { .. }), "{outcome:?}");
    assert_eq!(
        seen(&store, "send", "op").await,
        [
            ev(
                AuditKind::CancelRequested,
                "alice",
                1,
                State::Claimed,
                State::Claimed
            ),
            ev(
                AuditKind::Compensated,
                "w",
                1,
                State::Claimed,
                State::Cancelled
            ),
        ]
    );

    let failing = CountingEffect::keyed();
    failing.fail_withdraws("destination refuses deletes");
    let outcome = worker
        .run("kept", &order(2), &cancelling(&failing, &store, "alice"))
        .await
        .unwrap();
    assert!(
        matches!(outcome, Outcome::WithdrawFailed { .. }),
        "{outcome:?}"
    );
    let events = history(&store, "send", "kept").await;
    assert_eq!(
        seen(&store, "send", "kept").await,
        [
            ev(
                AuditKind::CancelRequested,
                "alice",
                1,
                State::Claimed,
                State::Claimed
            ),
            ev(
                AuditKind::WithdrawFailed,
                "w",
                1,
                State::Claimed,
                State::Completed
            ),
        ]
    );
    let detail = events[1].detail.as_deref().unwrap_or_default();
    assert!(detail.contains("destination refuses deletes"), "{detail}");
}

/// A resolve appends `resolved` by the person named, under the held token;
/// a refused resolve appends nothing.
pub async fn resolve_is_audited<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    guard(&store, "mail", EffectKind::Opaque(StalePolicy::Hold))
        .with_owner("w")
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    let refused = ops::resolve_as(
        &store,
        "mail",
        "op",
        &Resolution::Failed,
        "stale",
        Some(7),
        "bob",
    )
    .await;
    assert!(matches!(refused, Err(Error::Moved { .. })), "{refused:?}");
    let resolution = Resolution::Completed {
        external_ref: Some("manual-1".into()),
    };
    ops::resolve_as(
        &store,
        "mail",
        "op",
        &resolution,
        "seen in the outbox",
        Some(1),
        "bob",
    )
    .await
    .unwrap();
    let events = history(&store, "mail", "op").await;
    assert_eq!(
        seen(&store, "mail", "op").await,
        [
            ev(AuditKind::Hold, "w", 1, State::Claimed, State::Held),
            ev(AuditKind::Resolved, "bob", 1, State::Held, State::Completed),
        ]
    );
    let detail = events[1].detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains("seen in the outbox") && detail.contains("manual-1"),
        "{detail}"
    );
}
