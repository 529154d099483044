//! Cancel: before the claim, while the effect runs, after completion, and
//! what the record says when the item cannot be withdrawn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceonly::ops::{self, CancelOutcome};
use onceonly::{
    Effect, EffectCtx, EffectKind, EffectOutcome, Guard, Outcome, StalePolicy, State, Store,
};

use super::support::{guard, order, record, spec};
use crate::effects::CountingEffect;
use crate::StoreFactory;

const NO_DEST: Option<&CountingEffect> = None;

/// A clone of `dest` whose first `perform` asks an operator's cancel of the
/// operation before it goes on.
fn cancelling<S: Store + Clone>(dest: &CountingEffect, store: &S) -> CountingEffect {
    let (store, first) = (store.clone(), Arc::new(AtomicBool::new(true)));
    dest.clone().with_hook(move |ctx| {
        let (store, first) = (store.clone(), first.clone());
        async move {
            if first.swap(false, Ordering::SeqCst) {
                let out = ops::cancel(&store, &ctx.job_type, &ctx.op_key, NO_DEST)
                    .await
                    .unwrap();
                assert!(
                    matches!(out, CancelOutcome::Requested { .. }),
                    "cancel of a live claim: {out:?}"
                );
            }
        }
    })
}

/// queued (never claimed) --cancel--> cancelled at once, and a failed
/// operation once the destination says nothing of it is there; a cancelled
/// operation is never done, and cancelling again says so.
pub async fn queued_cancel_is_immediate<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    ops::enqueue(&store, "send", "op", &order(1), None)
        .await
        .unwrap();
    let out = ops::cancel(&store, "send", "op", NO_DEST).await.unwrap();
    assert_eq!(
        out,
        CancelOutcome::Cancelled {
            withdrawn_ref: None
        }
    );
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Cancelled, 0));
    let outcome = guard(&store, "send", EffectKind::Keyed)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Cancelled { .. }), "{outcome:?}");
    assert_eq!(dest.calls("op"), 0, "a cancelled operation is not done");
    let again = ops::cancel(&store, "send", "op", NO_DEST).await.unwrap();
    assert_eq!(again, CancelOutcome::AlreadyCancelled);

    // A failed row was claimed: the cancel looks first (nothing there).
    dest.script(vec![EffectOutcome::Failed("rejected".into())]);
    guard(&store, "send", EffectKind::Keyed)
        .run("failed", &order(2), &dest)
        .await
        .unwrap();
    assert_eq!(record(&store, "send", "failed").await.state, State::Failed);
    cancelled_finding_nothing(&store, "failed", &dest).await;
}

/// The operator's cancel of `send:key` looks at `dest`, finds nothing
/// there, and cancels the row.
async fn cancelled_finding_nothing<S: Store>(store: &S, key: &str, dest: &CountingEffect) {
    let out = ops::cancel(store, "send", key, Some(dest)).await.unwrap();
    assert_eq!(
        out,
        CancelOutcome::Cancelled {
            withdrawn_ref: None
        }
    );
    assert_eq!(record(store, "send", key).await.state, State::Cancelled);
}

/// A destination that can neither look up nor withdraw.
struct Blind;

impl Effect for Blind {
    async fn perform(&self, _ctx: &EffectCtx) -> EffectOutcome {
        EffectOutcome::NotSent("not used".into())
    }
}

/// A queued row released after an unknown outcome (at-least-once redoes
/// it), with the item live: the earlier claim did send it. The operator's
/// cancel must find out at the destination: with one that looks up, the
/// item is withdrawn and then the row cancelled, naming it (see
/// [`cancel_after_a_claim_holds_when_not_looked_up`] for one that cannot).
pub async fn cancel_after_a_claim_withdraws_what_it_sent<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    let kind = EffectKind::Opaque(StalePolicy::AtLeastOnce);
    let outcome = guard(&store, "send", kind)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    let released = record(&store, "send", "op").await;
    assert_eq!((released.state, released.attempts), (State::Queued, 1));
    assert!(
        dest.live("op"),
        "the unknown outcome did reach the destination"
    );

    let out = ops::cancel(&store, "send", "op", Some(&dest))
        .await
        .unwrap();
    assert_eq!(
        out,
        CancelOutcome::Cancelled {
            withdrawn_ref: Some("ref-op".into())
        }
    );
    assert!(!dest.live("op"), "withdrawn");
    assert_eq!(dest.withdrawals("op"), 1);
    let r = record(&store, "send", "op").await;
    assert_eq!(
        (r.state, r.token, r.external_ref.as_deref()),
        (State::Cancelled, 1, Some("ref-op")),
        "the record names what was withdrawn"
    );
}

/// The same queued row when the cancel cannot look it up (no destination
/// given, or one that cannot look up): it is held, not cancelled, under the
/// token read, with a `hold` event naming the operator and why; a relay
/// run afterwards does not send it again; the item is left for the person
/// who resolves it. A failed row in the same case is left as it is
/// (nothing retries it).
pub async fn cancel_after_a_claim_holds_when_not_looked_up<F: StoreFactory>(factory: &F) {
    use onceonly::relay::{Relay, RelayConfig};

    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    let kind = EffectKind::Opaque(StalePolicy::AtLeastOnce);
    for (key, why) in [
        ("none", "no destination was given to look it up"),
        ("blind", "the destination could not look it up"),
    ] {
        dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
        guard(&store, "send", kind)
            .run(key, &order(1), &dest)
            .await
            .unwrap();
        let released = record(&store, "send", key).await;
        assert_eq!((released.state, released.attempts), (State::Queued, 1));
        let out = if key == "none" {
            ops::cancel_as(&store, "send", key, NO_DEST, "alice").await
        } else {
            ops::cancel_as(&store, "send", key, Some(&Blind), "alice").await
        }
        .unwrap();
        assert!(
            matches!(&out, CancelOutcome::HeldNotLookedUp { attempts: 1, reason } if reason.contains(why)),
            "an earlier claim may have sent it, and nobody can tell: {out:?}"
        );
        let held = record(&store, "send", key).await;
        assert_eq!(
            (held.state, held.token, held.attempts, &held.external_ref),
            (State::Held, released.token, 1, &released.external_ref),
            "held under the token read"
        );
        assert!(
            held.error.as_deref().unwrap_or_default().contains(why),
            "{held:?}"
        );
        let events = store.op_history("send", key).await.unwrap();
        let last = events.last().expect("a hold event");
        assert_eq!(
            (last.event, last.actor.as_str(), last.token),
            (onceonly::AuditKind::Hold, "alice", released.token)
        );
        assert_eq!(
            (last.from_state, last.to_state),
            (Some(State::Queued), Some(State::Held))
        );
        let detail = last.detail.as_deref().unwrap_or_default();
        assert!(detail.contains("alice") && detail.contains(why), "{detail}");
        assert_eq!(
            ops::cancel(&store, "send", key, NO_DEST).await.unwrap(),
            CancelOutcome::Held,
            "a second cancel leaves it to the person"
        );
    }

    // The retry is stopped: a relay run until nothing is queued sends
    // neither again (before, the released row was due after its backoff).
    let g = Guard::new(store.clone(), spec("send", kind)).unwrap();
    let config = RelayConfig {
        workers: 1,
        drain: true,
        ..RelayConfig::default()
    };
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    Relay::new(&g, &dest, config).run(stop).await.unwrap();
    for key in ["none", "blind"] {
        assert_eq!(dest.calls(key), 1, "{key}: sent once, not retried");
        assert!(dest.live(key), "{key}: the item is the person's to check");
        assert_eq!(record(&store, "send", key).await.state, State::Held);
    }

    // A failed row (an unknown outcome under at-most-once): not retried,
    // so the cancel without a lookup leaves it as it is and says so.
    let at_most_once = EffectKind::Opaque(StalePolicy::AtMostOnce);
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    guard(&store, "send", at_most_once)
        .run("failed", &order(1), &dest)
        .await
        .unwrap();
    let failed = record(&store, "send", "failed").await;
    assert_eq!((failed.state, failed.attempts), (State::Failed, 1));
    let out = ops::cancel(&store, "send", "failed", NO_DEST)
        .await
        .unwrap();
    assert!(
        matches!(out, CancelOutcome::NotLookedUp { attempts: 1, .. }),
        "{out:?}"
    );
    assert_eq!(record(&store, "send", "failed").await, failed, "unchanged");
}

/// The same, when the withdraw fails: not cancelled, the row stays queued
/// and the cancel says the item is live; a row released after a not-sent
/// outcome is cancelled once the lookup finds nothing.
pub async fn cancel_after_a_claim_stays_when_not_withdrawn<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    let kind = EffectKind::Opaque(StalePolicy::AtLeastOnce);
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    guard(&store, "send", kind)
        .run("live", &order(1), &dest)
        .await
        .unwrap();
    let released = record(&store, "send", "live").await;
    dest.fail_withdraws("destination down");
    let out = ops::cancel(&store, "send", "live", Some(&dest))
        .await
        .unwrap();
    assert_eq!(
        out,
        CancelOutcome::StillLive {
            state: State::Queued,
            external_ref: Some("ref-live".into()),
            reason: "destination down".into(),
        }
    );
    assert_eq!(record(&store, "send", "live").await, released, "unchanged");
    assert!(dest.live("live"));

    // Not sent on every try under the claim (the default three retries).
    dest.script(vec![EffectOutcome::NotSent("refused at connect".into()); 4]);
    guard(&store, "send", kind)
        .run("unsent", &order(2), &dest)
        .await
        .unwrap();
    assert_eq!(record(&store, "send", "unsent").await.state, State::Queued);
    cancelled_finding_nothing(&store, "unsent", &dest).await;
}

/// claimed --cancel--> cancel requested; the owner acts, then withdraws the
/// effect at the destination: cancelled, the item not live.
pub async fn cancel_while_running_withdraws_after_the_effect<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let worker = guard(&store, "send", EffectKind::Keyed);
    let outcome = worker
        .run("op", &order(1), &cancelling(&dest, &store))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            withdrawn_ref: Some("ref-op".into())
        }
    );
    assert_eq!(dest.count("op"), 1, "the effect happened");
    assert!(!dest.live("op"), "and was withdrawn");
    assert_eq!(dest.withdrawals("op"), 1);
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Cancelled, 1));
    assert_eq!(
        r.external_ref.as_deref(),
        Some("ref-op"),
        "the record names what was withdrawn"
    );
    assert!(r.cancel_requested);

    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::Cancelled { .. }), "{outcome:?}");
    assert_eq!(dest.calls("op"), 1, "not done again");
    assert_eq!(
        ops::cancel(&store, "send", "op", NO_DEST).await.unwrap(),
        CancelOutcome::AlreadyCancelled
    );
}

/// The same, but the withdraw fails: the record stays completed and says
/// so ([`Outcome::WithdrawFailed`]); the item is live.
pub async fn cancel_while_running_withdraw_fails_stays_completed<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.fail_withdraws("destination down");
    let worker = guard(&store, "send", EffectKind::Keyed);
    let outcome = worker
        .run("op", &order(1), &cancelling(&dest, &store))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::WithdrawFailed {
            external_ref: Some("ref-op".into()),
            error: "destination down".into()
        }
    );
    assert!(dest.live("op"), "the item is still at the destination");
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Completed, 1));
    assert_eq!(r.external_ref.as_deref(), Some("ref-op"));
    let error = r.error.clone().unwrap_or_default();
    assert!(
        error.contains("destination down"),
        "the record says why: {error:?}"
    );

    let out = ops::cancel(&store, "send", "op", Some(&dest))
        .await
        .unwrap();
    assert!(
        matches!(&out, CancelOutcome::StillLive { external_ref: Some(e), .. } if e == "ref-op"),
        "{out:?}"
    );
    assert_eq!(
        record(&store, "send", "op").await,
        r,
        "still completed, unchanged"
    );
}

/// A cancel requested before the effect, learned through the heartbeat,
/// stops the owner before it acts: cancelled, nothing at the destination.
pub async fn cancel_before_the_effect_stops_the_owner<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    // The first attempt is not sent; the retry must see the cancel first.
    dest.script(vec![EffectOutcome::NotSent("connection refused".into())]);
    let first = Arc::new(AtomicBool::new(true));
    let effect = dest.clone().with_hook({
        let store = store.clone();
        move |ctx| {
            let (store, first) = (store.clone(), first.clone());
            async move {
                if !first.swap(false, Ordering::SeqCst) {
                    return;
                }
                ops::cancel(&store, &ctx.job_type, &ctx.op_key, NO_DEST)
                    .await
                    .unwrap();
                // Wait for the heartbeat to carry the request to the worker.
                for _ in 0..200 {
                    if ctx.cancel_requested() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                panic!("the heartbeat never carried the cancel request");
            }
        }
    });
    let worker = Guard::new(
        store.clone(),
        spec("send", EffectKind::Keyed).heartbeat(Duration::from_millis(10)),
    )
    .unwrap();
    let outcome = worker.run("op", &order(1), &effect).await.unwrap();
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            withdrawn_ref: None
        }
    );
    assert_eq!(
        (dest.calls("op"), dest.count("op")),
        (1, 0),
        "stopped before acting"
    );
    assert_eq!(record(&store, "send", "op").await.state, State::Cancelled);
}

/// A cancel requested while an attempt turned out not sent ends cancelled:
/// the release to queued must not drop the request (it would be done later).
pub async fn cancel_requested_then_not_sent_ends_cancelled<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.script(vec![EffectOutcome::NotSent("connection refused".into())]);
    let mut no_retries = spec("send", EffectKind::Keyed);
    no_retries.max_retries = 0;
    let worker = Guard::new(store.clone(), no_retries).unwrap();
    let outcome = worker
        .run("op", &order(1), &cancelling(&dest, &store))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            withdrawn_ref: None
        }
    );
    let r = record(&store, "send", "op").await;
    assert_eq!(
        r.state,
        State::Cancelled,
        "the cancel request was kept: {r:?}"
    );
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::Cancelled { .. }), "{outcome:?}");
    assert_eq!((dest.calls("op"), dest.count("op")), (1, 0), "never done");
}

/// A cancel requested while an attempt's outcome turned out unknown: the
/// effect may exist and cannot be withdrawn without its reference, so the
/// record is held for a person, with the request kept; never queued.
pub async fn cancel_requested_then_unknown_is_held<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    dest.script(vec![EffectOutcome::Unknown("read timed out".into())]);
    let mut no_retries = spec("send", EffectKind::Keyed);
    no_retries.max_retries = 0;
    let worker = Guard::new(store.clone(), no_retries).unwrap();
    let outcome = worker
        .run("op", &order(1), &cancelling(&dest, &store))
        .await
        .unwrap();
    assert!(
        matches!(outcome, Outcome::Held { reason: Some(_) }),
        "{outcome:?}"
    );
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Held, 1), "{r:?}");
    assert!(r.cancel_requested, "the request is kept for the person");
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::Held { .. }), "{outcome:?}");
    assert_eq!(dest.calls("op"), 1, "not done again");
}

/// completed --cancel--> cancelled when the destination withdraws the item.
pub async fn completed_cancel_withdraws_at_destination<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let worker = guard(&store, "send", EffectKind::Keyed);
    worker.run("op", &order(1), &dest).await.unwrap();
    let out = ops::cancel(&store, "send", "op", Some(&dest))
        .await
        .unwrap();
    assert_eq!(
        out,
        CancelOutcome::Cancelled {
            withdrawn_ref: Some("ref-op".into())
        }
    );
    assert!(!dest.live("op"), "withdrawn");
    let r = record(&store, "send", "op").await;
    assert_eq!((r.state, r.token), (State::Cancelled, 1));
    let outcome = worker.run("op", &order(1), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::Cancelled { .. }), "{outcome:?}");
    assert_eq!(dest.calls("op"), 1, "not done again");
}

/// completed --cancel--> stays completed, and says so, without a
/// destination or when the withdraw fails.
pub async fn completed_cancel_stays_completed_when_not_withdrawn<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    guard(&store, "send", EffectKind::Keyed)
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    let done = record(&store, "send", "op").await;

    let out = ops::cancel(&store, "send", "op", NO_DEST).await.unwrap();
    assert!(
        matches!(&out, CancelOutcome::StillLive { external_ref: Some(e), .. } if e == "ref-op"),
        "{out:?}"
    );
    assert_eq!(
        record(&store, "send", "op").await,
        done,
        "no destination: unchanged"
    );

    dest.fail_withdraws("503 from the destination");
    let out = ops::cancel(&store, "send", "op", Some(&dest))
        .await
        .unwrap();
    match out {
        CancelOutcome::StillLive {
            state,
            external_ref,
            reason,
        } => {
            assert_eq!(state, State::Completed);
            assert_eq!(external_ref.as_deref(), Some("ref-op"));
            assert!(reason.contains("503"), "{reason}");
        }
        other => panic!("a failed withdraw leaves it live: {other:?}"),
    }
    assert_eq!(
        record(&store, "send", "op").await,
        done,
        "withdraw failed: unchanged"
    );
    assert!(dest.live("op"));
}

/// A held operation is not cancelled by an operator's cancel: nobody knows
/// whether the item exists; the cancel says it is held.
pub async fn held_cancel_says_held<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    guard(&store, "send", EffectKind::Opaque(StalePolicy::Hold))
        .run("op", &order(1), &dest)
        .await
        .unwrap();
    let held = record(&store, "send", "op").await;
    assert_eq!(held.state, State::Held);
    assert_eq!(
        ops::cancel(&store, "send", "op", Some(&dest))
            .await
            .unwrap(),
        CancelOutcome::Held
    );
    assert_eq!(record(&store, "send", "op").await, held, "unchanged");
}

/// A cancel asked for while a relay holds an unstarted claim, just as the
/// relay stops: the relay gives the claim back without acting, and the
/// cancel is not forgotten (the operation ends cancelled, never queued
/// again to be sent later).
pub async fn relay_shutdown_keeps_a_cancel_request<F: StoreFactory>(factory: &F) {
    use onceonly::relay::{Relay, RelayConfig};

    let store = factory.fresh().await;
    ops::enqueue(&store, "send", "op", &order(1), None)
        .await
        .unwrap();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    // Between the batch claim and the relay's next step: an operator's
    // cancel, and the shutdown signal.
    let hook = {
        let (store, stop_tx) = (store.clone(), stop_tx.clone());
        Arc::new(
            move |claimed: Vec<(onceonly::Record, onceonly::store::Claim)>| {
                let (store, stop_tx) = (store.clone(), stop_tx.clone());
                Box::pin(async move {
                    for (r, _) in claimed {
                        let out = ops::cancel(&store, &r.job_type, &r.op_key, NO_DEST)
                            .await
                            .unwrap();
                        assert!(matches!(out, CancelOutcome::Requested { .. }), "{out:?}");
                    }
                    stop_tx.send_replace(true);
                }) as futures::future::BoxFuture<'static, ()>
            },
        )
    };
    let relay_store = super::intercept::Intercept {
        after_claim_batch: hook,
        ..super::intercept::Intercept::new(store.clone())
    };
    let g = Guard::new(relay_store, spec("send", EffectKind::Keyed)).unwrap();
    let dest = CountingEffect::keyed();
    let config = RelayConfig {
        workers: 1,
        ..RelayConfig::default()
    };
    Relay::new(&g, &dest, config).run(stop).await.unwrap();

    assert_eq!(dest.calls("op"), 0, "the relay stopped before acting");
    let r = record(&store, "send", "op").await;
    assert_eq!(
        (r.state, r.token),
        (State::Cancelled, 1),
        "the cancel asked for during the shutdown is kept: {r:?}"
    );
    // Nothing is left for a later relay to send.
    let later = Guard::new(store.clone(), spec("send", EffectKind::Keyed)).unwrap();
    let claim = onceonly::store::OpClaimBatch {
        job_type: "send",
        owner: "later",
        lease: super::support::LEASE,
        limit: 10,
    };
    let again = later.store().op_claim_batch(&claim).await.unwrap();
    assert!(
        again.is_empty(),
        "claimed again after the cancel: {again:?}"
    );
}
