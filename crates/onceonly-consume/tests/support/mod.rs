//! The consumer's behaviour, checked the same way on every broker: each
//! test file gives a way to make a fresh queue on its real server.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onceonly::{
    idempotency_key, EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Store,
};
use onceonly_consume::{
    envelope_body, Broker, Consumer, ConsumerConfig, Error, Guarded, Handler, Publish,
};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::HttpDestination;
use onceonly_sqlite::SqliteStore;
use tokio::sync::watch;

/// Makes a fresh queue with the given redelivery timeout.
pub trait Queues {
    /// The broker type.
    type B: Publish;
    /// A fresh queue named after `test`.
    fn make(&self, test: &str, redelivery: Duration) -> impl Future<Output = Self::B>;
}

/// A fresh migrated SQLite store.
pub async fn store() -> SqliteStore {
    let dir = tempfile::tempdir().unwrap().keep();
    let store = SqliteStore::connect(&format!("sqlite://{}", dir.join("t.db").display()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

/// Whether a test must fail (CI=true) rather than skip when its server is down.
pub fn unreachable(test: &str, what: &str) -> bool {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: {what} unreachable under CI=true");
    }
    eprintln!("\n*** SKIPPED {test}: {what} unreachable ***\n");
    true
}

/// Runs `consumer` with `handler` until `done` says so (checked every
/// 50ms) or `within` passes; then stops it. Returns whether `done` held.
pub async fn consume_until<B: Broker, H: Handler>(
    consumer: &Consumer<B>,
    handler: &H,
    within: Duration,
    done: impl Fn(&Consumer<B>) -> bool,
) -> bool {
    let (stop_tx, stop_rx) = watch::channel(false);
    let watch = async {
        let started = Instant::now();
        let mut ok = false;
        while started.elapsed() < within {
            if done(consumer) {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = stop_tx.send(true);
        ok
    };
    let (ran, ok) = tokio::join!(consumer.run(handler, stop_rx), watch);
    ran.unwrap();
    ok
}

fn n(c: &std::sync::atomic::AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Nothing is left to deliver: after the redelivery timeout, a receive finds nothing.
async fn nothing_comes_back<B: Broker>(broker: &B, redelivery: Duration) {
    tokio::time::sleep(redelivery + Duration::from_millis(500)).await;
    let again = broker.receive(10).await.unwrap();
    assert!(
        again.is_empty(),
        "{} message(s) came back after the redelivery timeout",
        again.len()
    );
}

/// A redelivery timeout shorter than the job timeout: refused, both values named.
pub async fn short_redelivery_is_refused<Q: Queues>(q: &Q, name: &str, setting: &str) {
    let broker = q.make("refused", Duration::from_secs(5)).await;
    let spec = JobSpec::new("refused", EffectKind::Keyed).timeout(Duration::from_secs(10));
    let err = Consumer::new(broker, &spec, ConsumerConfig::default())
        .await
        .err()
        .expect("a 5s redelivery timeout against a 10s job must be refused");
    let text = err.to_string();
    assert!(matches!(err, Error::Timing(_)), "{text}");
    assert!(text.contains(&format!("{setting} (5s)")), "{name}: {text}");
    assert!(text.contains("job timeout (10s)"), "{name}: {text}");
}

/// One operation sent as two messages: one effect, both messages acked.
pub async fn two_messages_one_effect<Q: Queues>(q: &Q) {
    let redelivery = Duration::from_secs(3);
    let broker = q.make("twice", redelivery).await;
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let spec = JobSpec::new("twice", EffectKind::Keyed)
        .lease(Duration::from_secs(3))
        .timeout(Duration::from_secs(2));
    let guard = Guard::new(store().await, spec.clone()).unwrap();
    let destination = HttpDestination::new(&server.base_url(), Duration::from_secs(1)).unwrap();
    for _ in 0..2 {
        let body = envelope_body("order-7", &serde_json::json!({ "order": 7 }));
        broker.publish(body).await.unwrap();
    }
    let config = ConsumerConfig {
        workers: 2,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(broker, &spec, config).await.unwrap();
    let handler = Guarded {
        guard: &guard,
        effect: &destination,
    };
    let acked = consume_until(&consumer, &handler, Duration::from_secs(30), |c| {
        n(&c.stats().acked) == 2
    })
    .await;
    assert!(acked, "both messages acked: {}", consumer.stats().summary());
    assert_eq!(server.effects(&idempotency_key("twice", "order-7")), 1);
    assert_eq!(
        n(&consumer.stats().effects),
        1,
        "{}",
        consumer.stats().summary()
    );
    nothing_comes_back(consumer.broker(), redelivery).await;
}

/// Poison (not JSON, no key, a key reused with another payload): dead
/// letters, each once, never redelivered. Returns the broker and the
/// consumer's summary line.
pub async fn poison_goes_to_the_dead_letters<Q: Queues>(q: &Q) -> (Q::B, String) {
    let redelivery = Duration::from_secs(2);
    let broker = q.make("poison", redelivery).await;
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let spec = JobSpec::new("poison", EffectKind::Keyed).timeout(Duration::from_secs(1));
    let guard = Guard::new(store().await, spec.clone()).unwrap();
    let destination = HttpDestination::new(&server.base_url(), Duration::from_secs(1)).unwrap();
    broker.publish(b"{not json".to_vec()).await.unwrap();
    broker
        .publish(br#"{"payload":{"order":1}}"#.to_vec())
        .await
        .unwrap();
    let first = envelope_body("order-1", &serde_json::json!({ "order": 1 }));
    broker.publish(first).await.unwrap();
    let consumer = Consumer::new(broker, &spec, ConsumerConfig::default())
        .await
        .unwrap();
    let handler = Guarded {
        guard: &guard,
        effect: &destination,
    };
    // The valid one first, so the reuse below meets a stored payload.
    assert!(
        consume_until(&consumer, &handler, Duration::from_secs(20), |c| {
            n(&c.stats().received) == 3
        })
        .await
    );
    let reused = envelope_body("order-1", &serde_json::json!({ "order": 2 }));
    consumer.broker().publish(reused).await.unwrap();
    let settled = consume_until(&consumer, &handler, Duration::from_secs(20), |c| {
        n(&c.stats().received) == 4
    })
    .await;
    let stats = consumer.stats();
    assert!(settled, "{}", stats.summary());
    assert_eq!(n(&stats.dead_lettered), 3, "{}", stats.summary());
    assert_eq!(n(&stats.acked), 1, "{}", stats.summary());
    assert_eq!(server.effects(&idempotency_key("poison", "order-1")), 1);
    nothing_comes_back(consumer.broker(), redelivery).await;
    let summary = consumer.summary();
    (consumer.into_broker(), summary)
}

/// A job longer than the redelivery timeout, with a heartbeat: the
/// message stays with its worker (one delivery), the effect happens once.
pub async fn heartbeat_keeps_the_message<Q: Queues>(q: &Q) {
    let redelivery = Duration::from_secs(3);
    let broker = q.make("long", redelivery).await;
    let spec = JobSpec::new("long", EffectKind::Keyed)
        .lease(Duration::from_secs(3))
        .heartbeat(Duration::from_millis(900))
        .timeout(Duration::from_secs(12));
    let guard = Guard::new(store().await, spec.clone()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let slow = EffectFn(move |ctx: EffectCtx| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            // Twice the redelivery timeout.
            tokio::time::sleep(Duration::from_secs(6)).await;
            EffectOutcome::done_with_ref(format!("slow-{}", ctx.op_key))
        }
    });
    let body = envelope_body("order-9", &serde_json::json!({ "order": 9 }));
    broker.publish(body).await.unwrap();
    let config = ConsumerConfig {
        workers: 3,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(broker, &spec, config).await.unwrap();
    let handler = Guarded {
        guard: &guard,
        effect: &slow,
    };
    let acked = consume_until(&consumer, &handler, Duration::from_secs(30), |c| {
        n(&c.stats().acked) == 1
    })
    .await;
    let stats = consumer.stats();
    assert!(acked, "{}", stats.summary());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the effect ran once");
    assert_eq!(
        n(&stats.received),
        1,
        "never redelivered while alive: {}",
        stats.summary()
    );
    assert!(
        n(&stats.progress) >= 5,
        "progress at every beat: {}",
        stats.summary()
    );
    nothing_comes_back(consumer.broker(), redelivery).await;
}
