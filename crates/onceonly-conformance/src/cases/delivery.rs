//! Delivery: repeats, workers racing on one operation, similar operations,
//! and relays claiming queued operations.

use std::sync::Arc;

use futures::future::join_all;
use onceonly::store::{ClaimRow, OpClaim, OpClaimBatch};
use onceonly::{EffectKind, Guard, Outcome, Payload, StalePolicy, State, Store};
use serde_json::json;
use tokio::sync::Barrier;

use super::support::{all_records, guard, is_first_done, local_write, order, record, spec, LEASE};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// The same operation delivered 3 times in a row: 1 effect, 1 completed record.
pub async fn same_message_three_times<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let guard = guard(&store, "send", EffectKind::Keyed);
    let effect = CountingEffect::opaque();
    let payload = Payload::parse(r#"{"order": 1}"#).unwrap();
    let mut repeats = 0;
    for _ in 0..3 {
        match guard.run("order-1", &payload, &effect).await.unwrap() {
            Outcome::Done { repeat, .. } => repeats += usize::from(repeat),
            other => panic!("expected done, got {other:?}"),
        }
    }
    assert_eq!(effect.count("order-1"), 1, "effects");
    assert_eq!(
        effect.calls("order-1"),
        1,
        "the destination was reached once"
    );
    assert_eq!(repeats, 2, "two deliveries were repeats");
    let records = all_records(&store).await;
    assert_eq!(records.len(), 1, "one record");
    assert_eq!(records[0].state, State::Completed);
    assert_eq!(records[0].attempts, 1);
}

/// A local effect delivered 3 times writes one row in the user's table.
pub async fn local_same_message_three_times<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    factory.local_table(&store).await;
    let guard = guard(&store, "ledger", EffectKind::Local);
    for delivery in 0..3 {
        let outcome = guard
            .run_local("order-1", &order(1), local_write::<F>())
            .await
            .unwrap();
        match outcome {
            Outcome::Done { repeat, result, .. } => {
                assert_eq!(repeat, delivery > 0, "delivery {delivery}");
                assert_eq!(result, json!({ "rows": 1 }), "repeats get the first result");
            }
            other => panic!("delivery {delivery}: expected done, got {other:?}"),
        }
    }
    assert_eq!(
        factory.local_count(&store, "order-1").await,
        1,
        "rows written"
    );
    let r = record(&store, "ledger", "order-1").await;
    assert_eq!((r.state, r.token, r.attempts), (State::Completed, 1, 1));
}

/// `workers` guards, each on its own connection, deliver the same operation
/// at once, `runs` times with a new operation each time: one effect and one
/// acting worker per run.
async fn race<F: StoreFactory>(factory: &F, workers: usize, runs: u64) {
    let store = factory.fresh().await;
    let mut guards = Vec::new();
    for w in 0..workers {
        let on = if w == 0 {
            store.clone()
        } else {
            factory.second(&store).await
        };
        let kind = EffectKind::Opaque(StalePolicy::Hold);
        let g = Guard::new(on, spec("race", kind))
            .unwrap()
            .with_owner(format!("worker-{w}"));
        guards.push(Arc::new(g));
    }
    // No dedup at the destination: the count is every effect that happened.
    let effect = CountingEffect::opaque();
    for run in 0..runs {
        let key = format!("op-{run}");
        let barrier = Arc::new(Barrier::new(workers));
        let tasks = guards.iter().map(|g| {
            let (g, key, effect, barrier) =
                (g.clone(), key.clone(), effect.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                g.run(&key, &order(run), &effect).await
            })
        });
        let mut acted = 0;
        for outcome in join_all(tasks).await {
            match outcome.unwrap().unwrap() {
                o if is_first_done(&o) => acted += 1,
                Outcome::Done { repeat: true, .. } | Outcome::InProgress { .. } => {}
                other => panic!("run {run}: unexpected outcome {other:?}"),
            }
        }
        assert_eq!(acted, 1, "run {run}: workers that acted");
        assert_eq!(effect.count(&key), 1, "run {run}: effects");
    }
    assert_eq!(effect.total(), runs as u32, "effects over every run");
    let records = all_records(&store).await;
    assert_eq!(records.len() as u64, runs, "one record per operation");
    for r in records {
        assert_eq!(
            (r.state, r.token, r.attempts),
            (State::Completed, 1, 1),
            "{}",
            r.op_key
        );
    }
}

/// 2 workers on separate connections deliver the same operation at once,
/// 100 runs: 1 effect in every run.
pub async fn two_workers_race_100_runs<F: StoreFactory>(factory: &F) {
    race(factory, 2, 100).await;
}

/// 8 workers on separate connections deliver the same operation at once,
/// 25 runs: 1 effect in every run.
pub async fn eight_workers_race_25_runs<F: StoreFactory>(factory: &F) {
    race(factory, 8, 25).await;
}

/// 2 workers deliver the same local operation at once, 20 runs: one row in
/// the user's table per run.
pub async fn local_two_workers_race<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    factory.local_table(&store).await;
    let guards = [
        Arc::new(guard(&store, "ledger", EffectKind::Local)),
        Arc::new(guard(
            &factory.second(&store).await,
            "ledger",
            EffectKind::Local,
        )),
    ];
    for run in 0..20u64 {
        let key = format!("op-{run}");
        let barrier = Arc::new(Barrier::new(2));
        let tasks = guards.iter().map(|g| {
            let (g, key, barrier) = (g.clone(), key.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                g.run_local(&key, &order(run), local_write::<F>()).await
            })
        });
        let mut acted = 0;
        for outcome in join_all(tasks).await {
            match outcome.unwrap().unwrap() {
                o if is_first_done(&o) => acted += 1,
                Outcome::Done { repeat: true, .. } | Outcome::InProgress { .. } => {}
                other => panic!("run {run}: unexpected outcome {other:?}"),
            }
        }
        assert_eq!(acted, 1, "run {run}: workers that acted");
        assert_eq!(
            factory.local_count(&store, &key).await,
            1,
            "run {run}: rows written"
        );
    }
}

/// Two operations with similar data are two operations: 2 effects. The same
/// key under another job type is another operation too.
pub async fn similar_operations_are_two_effects<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let effect = CountingEffect::opaque();
    let payload = Payload::from_value(&json!({ "customer": 7, "amount": 100 }));
    let send = guard(&store, "send", EffectKind::Keyed);
    for key in ["order-1", "order-10"] {
        let outcome = send.run(key, &payload, &effect).await.unwrap();
        assert!(is_first_done(&outcome), "{key}: {outcome:?}");
    }
    let send_v2 = guard(&store, "send.v2", EffectKind::Keyed);
    let outcome = send_v2.run("order-1", &payload, &effect).await.unwrap();
    assert!(is_first_done(&outcome), "send.v2:order-1: {outcome:?}");

    assert_eq!(effect.count("order-1"), 2, "order-1 under two job types");
    assert_eq!(effect.count("order-10"), 1);
    let records = all_records(&store).await;
    assert_eq!(records.len(), 3, "three records");
    assert!(records.iter().all(|r| r.state == State::Completed));
}

/// Keys compare byte for byte: `k`, `K` and `k ` are three operations, each
/// claimed once (MySQL's default collations would fold case and ignore the
/// trailing space, making them one). At the store: [`Guard`] refuses a key
/// with a trailing space, but a store must not merge it with another.
pub async fn keys_differing_by_case_or_trailing_space_are_three_operations<F: StoreFactory>(
    factory: &F,
) {
    let store = factory.fresh().await;
    let keys = ["k", "K", "k "];
    for round in 0..2 {
        for op_key in keys {
            let p = OpClaim {
                job_type: "send",
                op_key,
                fingerprint: "f",
                payload: None,
                owner: "w1",
                lease: LEASE,
            };
            match (round, store.op_claim(&p).await.unwrap()) {
                (0, ClaimRow::Claimed(c)) => assert_eq!(c.token, 1, "{op_key:?}"),
                (1, ClaimRow::Existing(snap)) => assert_eq!(snap.record.op_key, op_key),
                (_, other) => panic!("round {round}, {op_key:?}: {other:?}"),
            }
        }
    }
    for op_key in keys {
        assert_eq!(record(&store, "send", op_key).await.op_key, op_key);
    }
    let records = all_records(&store).await;
    assert_eq!(records.len(), 3, "three records: {records:?}");
}

/// Two relays claim a batch of queued operations at once: each operation is
/// claimed by one relay, and each effect happens once.
pub async fn relays_claim_each_queued_operation_once<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    for n in 0..10 {
        let key = format!("op-{n}");
        onceonly::ops::enqueue(&store, "relay", &key, &order(n), None)
            .await
            .unwrap();
    }
    let relays = [store.clone(), factory.second(&store).await];
    let batches = join_all(relays.iter().enumerate().map(|(i, s)| async move {
        let owner = format!("relay-{i}");
        let p = OpClaimBatch {
            job_type: "relay",
            owner: &owner,
            lease: LEASE,
            limit: 10,
        };
        s.op_claim_batch(&p).await.unwrap()
    }))
    .await;
    let mut keys: Vec<String> = batches
        .iter()
        .flatten()
        .map(|(r, _)| r.op_key.clone())
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 10, "every operation claimed once: {batches:?}");
    assert_eq!(
        batches.iter().map(Vec::len).sum::<usize>(),
        10,
        "no operation claimed twice"
    );

    let effect = CountingEffect::keyed();
    for (relay, batch) in relays.iter().zip(&batches) {
        let g = guard(relay, "relay", EffectKind::Keyed);
        for (r, claim) in batch {
            assert_eq!(
                (r.state, claim.token, claim.attempts),
                (State::Claimed, 1, 1),
                "{}",
                r.op_key
            );
            let outcome = g.run_claimed(r, claim, &effect).await.unwrap();
            assert!(is_first_done(&outcome), "{}: {outcome:?}", r.op_key);
        }
    }
    assert_eq!(effect.total(), 10, "effects");
    let again = OpClaimBatch {
        job_type: "relay",
        owner: "relay-0",
        lease: LEASE,
        limit: 10,
    };
    assert!(
        store.op_claim_batch(&again).await.unwrap().is_empty(),
        "nothing left queued"
    );
    for r in all_records(&store).await {
        assert_eq!(r.state, State::Completed, "{}", r.op_key);
    }
}

/// A relay completes a batch in one statement, each row fenced by its own
/// token: a claim taken over meanwhile is not completed (lost claim), a claim
/// an operator asked to cancel is withdrawn, the rest complete.
pub async fn batch_completion_is_fenced_per_claim<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    for n in 0..4 {
        onceonly::ops::enqueue(&store, "batch", &format!("op-{n}"), &order(n), None)
            .await
            .unwrap();
    }
    let p = OpClaimBatch {
        job_type: "batch",
        owner: "relay",
        lease: LEASE,
        limit: 10,
    };
    let claims = store.op_claim_batch(&p).await.unwrap();
    assert_eq!(claims.len(), 4);
    let g = guard(&store, "batch", EffectKind::Keyed);
    let effect = CountingEffect::keyed();
    let mut done = Vec::new();
    for (r, claim) in &claims {
        match g.attempt_claimed(r, claim, &effect).await {
            onceonly::Attempt::Done(d) => done.push(d),
            onceonly::Attempt::Settled(other) => panic!("{}: {other:?}", r.op_key),
        }
    }
    // op-1: an operator asks to cancel while the effect ran.
    let cancel = onceonly::ops::cancel(&store, "batch", "op-1", None::<&CountingEffect>)
        .await
        .unwrap();
    assert!(
        matches!(cancel, onceonly::ops::CancelOutcome::Requested { .. }),
        "{cancel:?}"
    );
    // op-2: the claim goes past its lease and another worker takes it over.
    store.clock_offset().advance(super::support::PAST_LEASE);
    let taken = store
        .op_take_over(&onceonly::store::OpTakeOver {
            job_type: "batch",
            op_key: "op-2",
            stale_token: 1,
            to: State::Claimed,
            owner: "other",
            lease: LEASE,
            reason: "test take-over",
        })
        .await
        .unwrap();
    assert_eq!(taken.map(|c| c.token), Some(2));

    let outcomes = g.complete_batch(done, &effect).await;
    assert_eq!(outcomes.len(), 4);
    for (key, outcome) in &outcomes {
        match key.as_str() {
            "op-0" | "op-3" => assert!(
                is_first_done(outcome.as_ref().unwrap()),
                "{key}: {outcome:?}"
            ),
            "op-1" => assert!(
                matches!(
                    outcome,
                    Ok(Outcome::Cancelled {
                        withdrawn_ref: Some(_)
                    })
                ),
                "{key}: {outcome:?}"
            ),
            "op-2" => assert!(
                matches!(outcome, Err(onceonly::Error::LostClaim { .. })),
                "{key}: {outcome:?}"
            ),
            other => panic!("unexpected key {other}"),
        }
    }
    assert_eq!(
        record(&store, "batch", "op-0").await.state,
        State::Completed
    );
    assert_eq!(
        record(&store, "batch", "op-1").await.state,
        State::Cancelled
    );
    assert!(!effect.live("op-1"), "the cancelled item was withdrawn");
    let zombie_row = record(&store, "batch", "op-2").await;
    assert_eq!(
        (
            zombie_row.state,
            zombie_row.token,
            zombie_row.owner.as_deref()
        ),
        (State::Claimed, 2, Some("other"))
    );
    assert_eq!(
        record(&store, "batch", "op-3").await.state,
        State::Completed
    );
}

/// A batch claim never returns more rows than its limit, whatever plan the
/// database picks on a fresh table.
pub async fn batch_claim_respects_its_limit<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    for n in 0..50 {
        onceonly::ops::enqueue(&store, "limit", &format!("op-{n}"), &order(n), None)
            .await
            .unwrap();
    }
    let mut claimed = 0;
    for limit in [1, 1, 7, 1, 64] {
        let p = OpClaimBatch {
            job_type: "limit",
            owner: "relay",
            lease: LEASE,
            limit,
        };
        let got = store.op_claim_batch(&p).await.unwrap().len();
        let expected = (limit as usize).min(50 - claimed);
        assert_eq!(got, expected, "limit {limit}");
        claimed += got;
    }
    assert_eq!(claimed, 50);
}
