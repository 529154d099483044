//! The store's batcher on a real PostgreSQL: concurrent claims and moves go
//! as one statement, and still each caller hears its own row's outcome,
//! only once it is committed.

use std::time::Duration;

use futures::future::join_all;
use onceonly::store::{ClaimRow, OpClaim, OpMove};
use onceonly::{Payload, State, Store};
use onceonly_postgres::{BatchStats, PgOptions, PgStore};
use sqlx::Row;

mod common;

use common::{new_schema, url};

async fn migrated(schema: &str) -> PgStore {
    let options = PgOptions::default().schema(schema).max_connections(4);
    let store = PgStore::connect_with(&url(), options).await.unwrap();
    store.migrate().await.unwrap();
    store
}

fn claim<'a>(key: &'a str, payload: &'a Payload, owner: &'a str) -> OpClaim<'a> {
    OpClaim {
        job_type: "send",
        op_key: key,
        fingerprint: &payload.fingerprint,
        payload: payload.json.as_deref(),
        owner,
        lease: Duration::from_secs(30),
    }
}

fn complete(key: &str, token: i64) -> OpMove<'_> {
    let mut m = OpMove::new("send", key, token, State::Claimed, State::Completed);
    m.unless_cancel_requested = true;
    m.result = Some("null");
    m
}

fn stats(store: &PgStore) -> BatchStats {
    store.batch_stats().expect("batching is on by default")
}

/// Queues every future (one poll each: on this single-threaded runtime the
/// lanes cannot run meanwhile), then awaits them all. The calls queued
/// together are taken by the lane together.
async fn queued_together<F: std::future::Future + Unpin>(mut calls: Vec<F>) -> Vec<F::Output> {
    for call in &mut calls {
        assert!(
            futures::poll!(call).is_pending(),
            "a call answered before any lane ran"
        );
    }
    join_all(calls).await
}

#[tokio::test]
async fn calls_queued_together_go_as_one_statement_each_with_its_own_outcome() {
    if !common::ready("calls_queued_together_go_as_one_statement_each_with_its_own_outcome").await {
        return;
    }
    let schema = new_schema();
    let store = migrated(&schema).await;
    let none = Payload::none();
    let other = Payload::parse(r#"{"n":1}"#).unwrap();
    // Someone else's live claim and a completed record, before the batch.
    let ClaimRow::Claimed(held) = store
        .op_claim(&claim("held", &none, "other"))
        .await
        .unwrap()
    else {
        panic!("a new key is claimed")
    };
    let ClaimRow::Claimed(c) = store
        .op_claim(&claim("done", &none, "other"))
        .await
        .unwrap()
    else {
        panic!("a new key is claimed")
    };
    assert!(store.op_move(&complete("done", c.token)).await.unwrap());
    let before = stats(&store);

    let keys = ["k3", "held", "k1", "done", "k2"];
    let claims: Vec<OpClaim<'_>> = keys
        .iter()
        .map(|k| claim(k, if *k == "k2" { &other } else { &none }, "me"))
        .collect();
    let calls = claims.iter().map(|p| Box::pin(store.op_claim(p))).collect();
    let rows = queued_together(calls).await;

    let after = stats(&store);
    assert_eq!(after.batches - before.batches, 1, "{before:?} -> {after:?}");
    assert_eq!(after.calls - before.calls, 5);
    assert_eq!(after.one_by_one, 0);
    let mut tokens = Vec::new();
    for (key, row) in keys.iter().zip(rows) {
        match (*key, row.unwrap()) {
            ("held", ClaimRow::Existing(snap)) => {
                assert_eq!(snap.record.state, State::Claimed);
                assert_eq!(snap.record.token, held.token);
                assert_eq!(snap.record.owner.as_deref(), Some("other"));
            }
            ("done", ClaimRow::Existing(snap)) => {
                assert_eq!(snap.record.state, State::Completed);
            }
            (new, ClaimRow::Claimed(c)) if new.starts_with('k') => {
                assert_eq!((c.token, c.attempts), (1, 1), "{new}");
                assert_eq!(c.lease_until.0 - c.claimed_at.0, 30_000, "{new}");
                tokens.push((*key, c.token));
            }
            (key, row) => panic!("{key}: unexpected {row:?}"),
        }
    }
    // What each caller was told is what the table holds.
    let k2 = store.op_get("send", "k2").await.unwrap().unwrap().record;
    assert_eq!(k2.fingerprint, other.fingerprint);
    assert_eq!(k2.owner.as_deref(), Some("me"));

    // The moves, batched the same way: each caller hears its own row.
    let moves: Vec<OpMove<'_>> = tokens
        .iter()
        .map(|(k, t)| complete(k, *t))
        .chain([complete("held", held.token + 1), complete("done", c.token)])
        .collect();
    let before = stats(&store);
    let calls = moves.iter().map(|m| Box::pin(store.op_move(m))).collect();
    let moved: Vec<bool> = queued_together(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(moved, [true, true, true, false, false]);
    let after = stats(&store);
    assert_eq!(after.batches - before.batches, 1, "{before:?} -> {after:?}");
    for (key, _) in &tokens {
        let r = store.op_get("send", key).await.unwrap().unwrap().record;
        assert_eq!(r.state, State::Completed, "{key}");
        assert_eq!(r.result.as_deref(), Some("null"));
    }
    let held_now = store.op_get("send", "held").await.unwrap().unwrap().record;
    assert_eq!(
        (held_now.state, held_now.token),
        (State::Claimed, held.token)
    );
}

#[tokio::test]
async fn the_same_key_twice_goes_in_two_batches() {
    if !common::ready("the_same_key_twice_goes_in_two_batches").await {
        return;
    }
    let schema = new_schema();
    let store = migrated(&schema).await;
    let none = Payload::none();
    let (a1, a2, b) = (
        claim("a", &none, "first"),
        claim("a", &none, "second"),
        claim("b", &none, "first"),
    );
    let before = stats(&store);
    let calls = vec![
        Box::pin(store.op_claim(&a1)),
        Box::pin(store.op_claim(&a2)),
        Box::pin(store.op_claim(&b)),
    ];
    let rows: Vec<ClaimRow> = queued_together(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    // The first to arrive claims it; the second, in the next batch, finds
    // that claim. Sent together, ON CONFLICT would have refused the whole
    // statement ("cannot affect row a second time") and split it.
    let ClaimRow::Claimed(first) = &rows[0] else {
        panic!("the first claim of a wins: {:?}", rows[0])
    };
    let ClaimRow::Existing(snap) = &rows[1] else {
        panic!("the second claim of a finds the first: {:?}", rows[1])
    };
    assert_eq!(snap.record.token, first.token);
    assert_eq!(snap.record.owner.as_deref(), Some("first"));
    assert!(matches!(rows[2], ClaimRow::Claimed(_)));
    let after = stats(&store);
    assert_eq!(after.batches - before.batches, 2, "{before:?} -> {after:?}");
    assert_eq!(after.one_by_one, 0, "no batch statement failed");

    // Two completions of one claim in one queue: one moves it, one finds it moved.
    let (m1, m2) = (complete("a", first.token), complete("a", first.token));
    let calls = vec![Box::pin(store.op_move(&m1)), Box::pin(store.op_move(&m2))];
    let moved: Vec<bool> = queued_together(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(moved, [true, false]);
    assert_eq!(stats(&store).one_by_one, 0);
}

#[tokio::test]
async fn a_bad_row_fails_only_its_own_caller() {
    if !common::ready("a_bad_row_fails_only_its_own_caller").await {
        return;
    }
    let schema = new_schema();
    let store = migrated(&schema).await;
    let none = Payload::none();
    // PostgreSQL text cannot hold a NUL byte: the statement carrying it fails.
    let bad_payload = Payload {
        json: Some("\"a\u{0}b\"".into()),
        ..Payload::none()
    };
    let claims = [
        claim("x1", &none, "me"),
        claim("bad", &bad_payload, "me"),
        claim("x2", &none, "me"),
    ];
    let calls = claims.iter().map(|p| Box::pin(store.op_claim(p))).collect();
    let rows = queued_together(calls).await;
    assert_eq!(stats(&store).one_by_one, 1);
    let mut tokens = Vec::new();
    for (p, row) in claims.iter().zip(rows) {
        match (p.op_key, row) {
            ("bad", Err(e)) => assert!(e.to_string().contains("0x00"), "{e}"),
            (key, Ok(ClaimRow::Claimed(c))) => tokens.push((key, c.token)),
            (key, other) => panic!("{key}: {other:?}"),
        }
    }
    assert!(store.op_get("send", "bad").await.unwrap().is_none());

    let mut moves: Vec<OpMove<'_>> = tokens.iter().map(|(k, t)| complete(k, *t)).collect();
    moves[0].external_ref = Some("ref\u{0}");
    let calls = moves.iter().map(|m| Box::pin(store.op_move(m))).collect();
    let moved = queued_together(calls).await;
    assert_eq!(stats(&store).one_by_one, 2);
    assert!(moved[0].is_err(), "{:?}", moved[0]);
    assert!(*moved[1].as_ref().unwrap());
    let x1 = store.op_get("send", tokens[0].0).await.unwrap().unwrap();
    assert_eq!(
        x1.record.state,
        State::Claimed,
        "the bad move wrote nothing"
    );
}

/// Each answer is already committed: another connection reads it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_hears_back_only_after_the_commit() {
    if !common::ready("a_caller_hears_back_only_after_the_commit").await {
        return;
    }
    let schema = new_schema();
    let store = migrated(&schema).await;
    let reader = store.pool().clone();
    let none = Payload::none();
    let table = format!("\"{schema}\".ops");
    let read = |key: String| {
        let (reader, table) = (reader.clone(), table.clone());
        async move {
            let sql =
                format!("SELECT state, token FROM {table} WHERE job_type = 'send' AND op_key = $1");
            let row = sqlx::query(&sql)
                .bind(&key)
                .fetch_optional(&reader)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{key}: answered but not visible to another connection"));
            (row.get::<String, _>("state"), row.get::<i64, _>("token"))
        }
    };
    let ops = (0..200).map(|i| {
        let (store, none, read) = (&store, &none, &read);
        async move {
            let key = format!("op-{i}");
            let ClaimRow::Claimed(c) = store.op_claim(&claim(&key, none, "me")).await.unwrap()
            else {
                panic!("{key} is new")
            };
            assert_eq!(read(key.clone()).await, ("claimed".to_owned(), c.token));
            assert!(store.op_move(&complete(&key, c.token)).await.unwrap());
            assert_eq!(read(key).await, ("completed".to_owned(), c.token));
        }
    });
    join_all(ops).await;
    let s = stats(&store);
    assert_eq!(s.calls, 400);
    assert!(
        s.batches < s.calls,
        "200 concurrent operations shared statements: {s:?}"
    );
}

/// Two processes (two stores, each with its own lanes) claim and complete
/// the same keys in opposite orders at once. Each batch locks its rows in
/// key order, so no statement fails on a deadlock (it would be split and
/// counted), and every key is claimed, then completed, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_batches_on_the_same_keys_do_not_deadlock() {
    if !common::ready("two_processes_batches_on_the_same_keys_do_not_deadlock").await {
        return;
    }
    let schema = new_schema();
    let one = migrated(&schema).await;
    let two = one.reconnect().await.unwrap();
    // A few rounds: one order clash is not certain to meet in one.
    for round in 0..4 {
        let keys: Vec<String> = (0..400).map(|i| format!("r{round}-{i:04}")).collect();
        let (won_one, won_two) = tokio::join!(
            claim_and_complete(&one, &keys, "one", false),
            claim_and_complete(&two, &keys, "two", true)
        );
        assert_eq!(won_one + won_two, keys.len(), "each key claimed once");
    }
    for store in [&one, &two] {
        let s = stats(store);
        assert_eq!(s.one_by_one, 0, "no batch failed (deadlock): {s:?}");
    }
    let completed: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM \"{schema}\".ops WHERE state = 'completed' AND token = 1"
    ))
    .fetch_one(one.pool())
    .await
    .unwrap();
    assert_eq!(completed, 1600);
}

/// Claims `keys` all at once (in reverse when `reversed`) and completes the
/// ones it won; returns how many it won.
async fn claim_and_complete(
    store: &PgStore,
    keys: &[String],
    owner: &str,
    reversed: bool,
) -> usize {
    let none = Payload::none();
    let order: Vec<&String> = match reversed {
        true => keys.iter().rev().collect(),
        false => keys.iter().collect(),
    };
    let ops = order.into_iter().map(|key| {
        let none = &none;
        async move {
            match store.op_claim(&claim(key, none, owner)).await.unwrap() {
                ClaimRow::Claimed(c) => {
                    assert!(store.op_move(&complete(key, c.token)).await.unwrap());
                    1
                }
                ClaimRow::Existing(_) => 0,
            }
        }
    });
    join_all(ops).await.into_iter().sum()
}

/// Relay loops' claims of queued rows (same job type, owner and lease) go as
/// one statement; its rows are dealt out, each call within its limit, and
/// no row to two calls.
#[tokio::test]
async fn queued_claims_share_one_statement_and_deal_out_the_rows() {
    if !common::ready("queued_claims_share_one_statement_and_deal_out_the_rows").await {
        return;
    }
    let schema = new_schema();
    let store = migrated(&schema).await;
    let none = Payload::none();
    for i in 0..4 {
        let p = onceonly::store::OpEnqueue {
            job_type: "send",
            op_key: &format!("q{i}"),
            fingerprint: &none.fingerprint,
            payload: None,
            delay: None,
        };
        store.op_enqueue(&p).await.unwrap();
    }
    let batch = |limit| onceonly::store::OpClaimBatch {
        job_type: "send",
        owner: "relay",
        lease: Duration::from_secs(30),
        limit,
    };
    let (one, two, five) = (batch(1), batch(2), batch(5));
    let before = stats(&store);
    let calls = vec![
        Box::pin(store.op_claim_batch(&one)),
        Box::pin(store.op_claim_batch(&two)),
        Box::pin(store.op_claim_batch(&five)),
    ];
    let got: Vec<Vec<String>> = queued_together(calls)
        .await
        .into_iter()
        .map(|rows| rows.unwrap().into_iter().map(|(r, _)| r.op_key).collect())
        .collect();
    let after = stats(&store);
    assert_eq!(after.batches - before.batches, 1, "{before:?} -> {after:?}");
    assert_eq!(
        got.iter().map(Vec::len).collect::<Vec<_>>(),
        [1, 2, 1],
        "{got:?}"
    );
    let mut all: Vec<&String> = got.iter().flatten().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4, "every queued row to one call: {got:?}");
}
