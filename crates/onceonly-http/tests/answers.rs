//! A destination's answers are bounded and checked: a body longer than
//! `max_answer_bytes` is cut while it streams in (a declared 64 MiB body, an
//! endless chunked one), and its outcome follows the destination protocol;
//! a reference that breaks the answer rules is never stored.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use onceonly::{
    Effect, EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, LookupOutcome, Outcome,
    Payload, StalePolicy, State, Store,
};
use onceonly_http::{ClientOptions, HttpDestination, Shape, ShapeSpec};
use onceonly_sqlite::SqliteStore;
use support::{RawServer, Reply};

const BIG: u64 = 64 << 20;

fn ctx() -> EffectCtx {
    EffectCtx::detached("send", "k1", serde_json::json!({"n": 1}))
}

fn destination(server: &RawServer, spec: ShapeSpec) -> HttpDestination {
    let shape = Shape::resolve(&spec, |_| None).unwrap();
    let options = ClientOptions {
        request_timeout: Duration::from_secs(20),
        ca_cert: None,
    };
    HttpDestination::with_shape(&server.base_url(), shape, &options).unwrap()
}

/// The server could write only what the sockets' buffers hold once the
/// client stopped reading: far less than the body.
fn assert_stopped_reading(server: &RawServer) {
    let written = server.written.load(Ordering::Relaxed);
    assert!(
        written < BIG / 2,
        "the client read {written} bytes of a body it should have cut at 64 KiB"
    );
}

#[tokio::test]
async fn a_2xx_with_a_huge_content_length_is_unknown_not_done() {
    let server = RawServer::start("127.0.0.1", Reply::Huge(200, BIG)).await;
    let dest = destination(&server, ShapeSpec::test_protocol());
    match dest.perform(&ctx()).await {
        EffectOutcome::Unknown(why) => {
            assert!(why.contains("max_answer_bytes = 65536"), "{why}");
            assert!(why.contains("whether it is done is unknown"), "{why}");
        }
        other => panic!("a cut 2xx answer was taken as {other:?}"),
    }
    assert_stopped_reading(&server);
}

#[tokio::test]
async fn a_2xx_with_an_endless_chunked_body_is_cut_not_waited_for() {
    let server = RawServer::start("127.0.0.1", Reply::Endless(201)).await;
    let dest = destination(&server, ShapeSpec::test_protocol());
    match dest.perform(&ctx()).await {
        EffectOutcome::Unknown(why) => {
            assert!(why.contains("max_answer_bytes = 65536"), "{why}");
            assert!(!why.contains("timed out"), "{why}");
        }
        other => panic!("an endless 2xx answer was taken as {other:?}"),
    }
    assert_stopped_reading(&server);
}

#[tokio::test]
async fn a_cut_4xx_stays_a_permanent_failure_naming_the_limit() {
    let server = RawServer::start("127.0.0.1", Reply::Huge(422, BIG)).await;
    let dest = destination(&server, ShapeSpec::test_protocol());
    match dest.perform(&ctx()).await {
        EffectOutcome::Failed(why) => {
            assert!(why.contains("refused with 422"), "{why}");
            assert!(why.contains("max_answer_bytes = 65536"), "{why}");
        }
        other => panic!("a cut 4xx answer was taken as {other:?}"),
    }
    assert_stopped_reading(&server);
}

#[tokio::test]
async fn a_cut_5xx_stays_unknown() {
    let server = RawServer::start("127.0.0.1", Reply::Endless(503)).await;
    let dest = destination(&server, ShapeSpec::test_protocol());
    match dest.perform(&ctx()).await {
        EffectOutcome::Unknown(why) => {
            assert!(why.contains("answered 503"), "{why}");
            assert!(why.contains("max_answer_bytes = 65536"), "{why}");
        }
        other => panic!("a cut 5xx answer was taken as {other:?}"),
    }
    assert_stopped_reading(&server);
}

#[tokio::test]
async fn the_limit_is_set_per_destination() {
    let padded = format!(r#"{{"id":"a1","pad":"{}"}}"#, "x".repeat(2000));
    let server = RawServer::start("127.0.0.1", Reply::Body(201, padded)).await;
    let small = ShapeSpec {
        max_answer_bytes: Some(1024),
        ..ShapeSpec::test_protocol()
    };
    match destination(&server, small).perform(&ctx()).await {
        EffectOutcome::Unknown(why) => assert!(why.contains("max_answer_bytes = 1024"), "{why}"),
        other => panic!("an answer over a 1024-byte limit was taken as {other:?}"),
    }
    match destination(&server, ShapeSpec::test_protocol())
        .perform(&ctx())
        .await
    {
        EffectOutcome::Done { external_ref, .. } => assert_eq!(external_ref.as_deref(), Some("a1")),
        other => panic!("a 2 KB answer under the default limit was taken as {other:?}"),
    }
    let zero = ShapeSpec {
        max_answer_bytes: Some(0),
        ..ShapeSpec::test_protocol()
    };
    let err = Shape::resolve(&zero, |_| None).unwrap_err();
    assert!(err.contains("max_answer_bytes"), "{err}");
}

#[tokio::test]
async fn a_cut_lookup_answer_cannot_answer() {
    let server = RawServer::start("127.0.0.1", Reply::Huge(200, BIG)).await;
    let dest = destination(&server, ShapeSpec::test_protocol());
    match dest.lookup(&ctx()).await {
        LookupOutcome::Unavailable(why) => assert!(why.contains("max_answer_bytes"), "{why}"),
        other => panic!("a cut lookup answer was taken as {other:?}"),
    }
    assert_stopped_reading(&server);
}

async fn fresh_store(dir: &tempfile::TempDir) -> SqliteStore {
    let url = format!("sqlite://{}", dir.path().join("ops.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    store
}

#[tokio::test]
async fn a_reference_with_control_characters_is_refused_and_never_stored() {
    let hostile = serde_json::json!({"id": "a1\u{0}\u{1b}[2J\r\nFAKE LINE\u{7}"}).to_string();
    let server = RawServer::start("127.0.0.1", Reply::Body(201, hostile)).await;
    let dest = destination(&server, ShapeSpec::test_protocol());
    match dest.perform(&ctx()).await {
        EffectOutcome::Failed(why) => {
            assert!(why.contains("control character U+0000"), "{why}");
            assert!(!why.chars().any(onceonly::answer::is_control), "{why:?}");
        }
        other => panic!("a reference with control characters was taken as {other:?}"),
    }

    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(&dir).await;
    let guard = Guard::new(store.clone(), JobSpec::new("send", EffectKind::Keyed)).unwrap();
    let outcome = guard
        .run("k1", &Payload::parse(r#"{"n":1}"#).unwrap(), &dest)
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
    let record = store_record(&store, "k1").await;
    assert_eq!(record.state, State::Failed);
    assert_eq!(record.external_ref, None);
    let error = record.error.unwrap_or_default();
    assert!(
        !error.chars().any(onceonly::answer::is_control),
        "{error:?}"
    );
}

#[tokio::test]
async fn any_effect_answering_an_oversized_reference_or_result_is_failed_unstored() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(&dir).await;
    let spec = JobSpec::new("send", EffectKind::Opaque(StalePolicy::Hold));
    let guard = Guard::new(store.clone(), spec).unwrap();
    let payload = Payload::none();
    let long_ref =
        EffectFn(|_ctx: EffectCtx| async { EffectOutcome::done_with_ref("r".repeat(2049)) });
    let outcome = guard.run("ref", &payload, &long_ref).await.unwrap();
    assert!(
        matches!(&outcome, Outcome::Failed { error: Some(e) } if e.contains("2049 bytes, over the limit of 2048")),
        "{outcome:?}"
    );
    let big_result = EffectFn(|_ctx: EffectCtx| async {
        EffectOutcome::Done {
            external_ref: Some("ok".into()),
            result: serde_json::Value::String("x".repeat(70_000)),
        }
    });
    let outcome = guard.run("result", &payload, &big_result).await.unwrap();
    assert!(
        matches!(&outcome, Outcome::Failed { error: Some(e) } if e.contains("result is 70002 bytes")),
        "{outcome:?}"
    );
    for key in ["ref", "result"] {
        let record = store_record(&store, key).await;
        assert_eq!(record.state, State::Failed, "{key}");
        assert_eq!(record.external_ref, None, "{key}");
        assert_eq!(record.result, None, "{key}");
    }
}

async fn store_record(store: &SqliteStore, key: &str) -> onceonly::Record {
    store
        .op_get("send", key)
        .await
        .unwrap()
        .expect("the record exists")
        .record
}

/// An effect whose lookup finds an item under a hostile reference, and
/// which counts the withdraws it is asked for.
struct HostileLookup(std::sync::atomic::AtomicUsize);

impl Effect for HostileLookup {
    async fn perform(&self, _ctx: &EffectCtx) -> EffectOutcome {
        EffectOutcome::Failed("the destination refused".into())
    }

    async fn lookup(&self, _ctx: &EffectCtx) -> LookupOutcome {
        LookupOutcome::Found {
            external_ref: Some("item\u{1b}[2J\r\nFAKE".into()),
            result: serde_json::Value::Null,
        }
    }

    async fn withdraw(&self, _ctx: &EffectCtx, _external_ref: &str) -> onceonly::WithdrawOutcome {
        self.0.fetch_add(1, Ordering::SeqCst);
        onceonly::WithdrawOutcome::Withdrawn
    }
}

#[tokio::test]
async fn a_cancel_whose_lookup_answers_a_hostile_reference_withdraws_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(&dir).await;
    let effect = HostileLookup(Default::default());
    let guard = Guard::new(store.clone(), JobSpec::new("send", EffectKind::Lookup)).unwrap();
    let outcome = guard.run("k1", &Payload::none(), &effect).await.unwrap();
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
    let cancelled = onceonly::ops::cancel(&store, "send", "k1", Some(&effect))
        .await
        .unwrap();
    match cancelled {
        onceonly::ops::CancelOutcome::NotLookedUp { reason, .. } => {
            assert!(reason.contains("control character U+001B"), "{reason}")
        }
        other => panic!("a hostile reference from the lookup gave {other:?}"),
    }
    assert_eq!(effect.0.load(Ordering::SeqCst), 0, "it was withdrawn");
    let record = store_record(&store, "k1").await;
    assert_eq!(record.external_ref, None);
    assert_eq!(record.state, State::Failed);
}
