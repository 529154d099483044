//! Input: bad keys, payloads and timing rules are refused before anything
//! is written; a key reused with another payload is an error, a repeat with
//! the same payload is not.

use std::time::Duration;

use onceonly::ops::{self, EnqueueOutcome};
use onceonly::{EffectKind, Error, FaultPoint, Guard, JobSpec, Outcome, Payload, State};

use super::support::{all_records, crash_at, guard, is_first_done, local_write, order, record};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// An empty key, a key over 512 bytes, a payload that is not JSON and a bad
/// job type are [`Error::Invalid`], and nothing is written or done.
pub async fn bad_input_is_refused_and_nothing_written<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    factory.local_table(&store).await;
    let dest = CountingEffect::opaque();
    let worker = guard(&store, "send", EffectKind::Keyed);
    let too_long = "x".repeat(513);
    for key in ["", too_long.as_str()] {
        let err = worker.run(key, &order(1), &dest).await.unwrap_err();
        assert!(
            matches!(err, Error::Invalid(_)),
            "run with key of {} bytes: {err}",
            key.len()
        );
        let err = ops::enqueue(&store, "send", key, &order(1), None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Invalid(_)),
            "enqueue with key of {} bytes: {err}",
            key.len()
        );
        let local = guard(&store, "ledger", EffectKind::Local);
        let err = local
            .run_local(key, &order(1), local_write::<F>())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Invalid(_)),
            "run_local with key of {} bytes: {err}",
            key.len()
        );
    }
    for text in ["{not json", "", "{\"order\": 1", "order=1"] {
        let err = Payload::parse(text).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "payload {text:?}: {err}");
    }
    let too_long_job = "j".repeat(129);
    for job in ["", "send email", "a:b", too_long_job.as_str()] {
        let err = Guard::new(store.clone(), JobSpec::new(job, EffectKind::Keyed)).err();
        assert!(
            matches!(err, Some(Error::Invalid(_))),
            "job type {job:?}: {err:?}"
        );
        let err = ops::enqueue(&store, job, "op", &order(1), None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Invalid(_)),
            "enqueue with job type {job:?}: {err}"
        );
    }
    // A local effect is run in the caller's transaction, never by `run`.
    let err = guard(&store, "ledger", EffectKind::Local)
        .run("op", &order(1), &dest)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");

    assert_eq!(all_records(&store).await, vec![], "nothing written");
    assert_eq!(dest.total(), 0, "nothing done");
    assert_eq!(factory.local_count(&store, "").await, 0);

    // The limits are inclusive: 512 bytes (256 two-byte characters) is a key.
    let longest = "é".repeat(256);
    assert!(is_first_done(
        &worker.run(&longest, &order(1), &dest).await.unwrap()
    ));
    assert_eq!(record(&store, "send", &longest).await.op_key, longest);
}

/// A spec that breaks a timing rule of docs/DESIGN.md section 4 is refused by
/// [`Guard::new`] with [`Error::Timing`] naming the numbers.
pub async fn broken_timing_rule_refuses_the_guard<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let base = JobSpec::new("send", EffectKind::Keyed);
    let s = Duration::from_secs;
    let broken = [
        (base.clone().lease(s(10)).timeout(s(10)), "10s"),
        (
            base.clone().lease(s(30)).timeout(s(60)).heartbeat(s(11)),
            "11s",
        ),
        (
            base.clone()
                .lease(s(30))
                .timeout(s(10))
                .redelivery_timeout(s(5)),
            "5s",
        ),
        (
            base.clone()
                .lease(s(30))
                .timeout(s(10))
                .lock_lifetime(s(10)),
            "10s",
        ),
        (base.clone().lease(Duration::ZERO), "0s"),
    ];
    for (spec, number) in broken {
        match Guard::new(store.clone(), spec.clone()) {
            Err(Error::Timing(why)) => assert!(why.contains(number), "{spec:?}: {why}"),
            Err(other) => panic!("{spec:?}: expected a timing error, got {other}"),
            Ok(_) => panic!("{spec:?}: a broken timing rule was accepted"),
        }
    }
    let long = base.clone().lease(s(30)).timeout(s(60)).heartbeat(s(10));
    assert!(
        Guard::new(store.clone(), long).is_ok(),
        "a heartbeat at lease/3 lets a job outlive its lease"
    );
    let queue = base
        .lease(s(30))
        .timeout(s(10))
        .redelivery_timeout(s(11))
        .lock_lifetime(s(11));
    assert!(Guard::new(store.clone(), queue).is_ok());
    assert_eq!(all_records(&store).await, vec![], "nothing written");
}

/// The same key with another payload is [`Error::PayloadMismatch`] whatever
/// state the record is in, and nothing changes.
pub async fn payload_mismatch_changes_nothing<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::opaque();
    let worker = guard(&store, "send", EffectKind::Keyed);
    worker.run("completed", &order(1), &dest).await.unwrap();
    ops::enqueue(&store, "send", "queued", &order(1), None)
        .await
        .unwrap();
    guard(&store, "send", EffectKind::Keyed)
        .with_fault_hook(crash_at(FaultPoint::AfterClaim))
        .run("claimed", &order(1), &dest)
        .await
        .unwrap_err();
    let before = all_records(&store).await;

    for key in ["completed", "queued", "claimed"] {
        match worker.run(key, &order(2), &dest).await {
            Err(Error::PayloadMismatch {
                job_type,
                op_key,
                stored,
                offered,
            }) => {
                assert_eq!((job_type.as_str(), op_key.as_str()), ("send", key));
                assert_eq!(
                    (stored, offered),
                    (order(1).fingerprint, order(2).fingerprint),
                    "{key}"
                );
            }
            other => panic!("{key}: expected a payload mismatch, got {other:?}"),
        }
        let err = ops::enqueue(&store, "send", key, &order(2), None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::PayloadMismatch { .. }),
            "enqueue {key}: {err}"
        );
    }
    assert_eq!(all_records(&store).await, before, "nothing changed");
    assert_eq!(
        (dest.total(), dest.calls("completed")),
        (1, 1),
        "nothing more done"
    );
}

/// Enqueueing an operation that exists with the same payload is a no-op
/// that says so ([`EnqueueOutcome::AlreadyExists`]); a payload that differs
/// only in key order is the same payload.
pub async fn enqueue_same_payload_is_a_noop<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let first = ops::enqueue(
        &store,
        "send",
        "op",
        &order(1),
        Some(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert_eq!(first, EnqueueOutcome::Queued);
    let queued = record(&store, "send", "op").await;
    let again = ops::enqueue(&store, "send", "op", &order(1), None)
        .await
        .unwrap();
    assert_eq!(
        again,
        EnqueueOutcome::AlreadyExists(Box::new(queued.clone()))
    );
    assert_eq!(
        record(&store, "send", "op").await,
        queued,
        "unchanged, due time included"
    );

    let dest = CountingEffect::opaque();
    let worker = guard(&store, "send", EffectKind::Keyed);
    let a = Payload::parse(r#"{"a": 1, "b": [1, 2]}"#).unwrap();
    let b = Payload::parse(r#"{ "b": [1, 2], "a": 1 }"#).unwrap();
    assert!(is_first_done(
        &worker.run("reordered", &a, &dest).await.unwrap()
    ));
    let repeat = worker.run("reordered", &b, &dest).await.unwrap();
    assert!(
        matches!(repeat, Outcome::Done { repeat: true, .. }),
        "{repeat:?}"
    );
    let done = record(&store, "send", "reordered").await;
    assert_eq!(done.state, State::Completed);
    let again = ops::enqueue(&store, "send", "reordered", &b, None)
        .await
        .unwrap();
    assert_eq!(again, EnqueueOutcome::AlreadyExists(Box::new(done.clone())));
    assert_eq!(
        record(&store, "send", "reordered").await,
        done,
        "a completed operation is not requeued"
    );
    assert_eq!(dest.total(), 1);
}
