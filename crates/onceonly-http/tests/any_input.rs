//! Whatever key and payload onceonly accepts is relayed and completed at
//! the HTTP destination; whatever it refuses leaves nothing behind. Keys
//! are drawn from all of Unicode, control characters included, so a key the
//! destination could not be sent (an HTTP header cannot hold a newline) is
//! refused at the door instead of looping in the relay.

use std::time::Duration;

use onceonly::relay::{Relay, RelayConfig};
use onceonly::{ops, EffectKind, Guard, JobSpec, Payload, StalePolicy, State, Store};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::HttpDestination;
use onceonly_sqlite::SqliteStore;
use proptest::prelude::*;
use serde_json::Value;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        // Anything at all, short or over the limit.
        any::<String>(),
        "\\PC{1,80}",
        // Printable text with one control character in it.
        (
            "\\PC{0,10}",
            prop::char::range('\0', '\u{9f}'),
            "\\PC{0,10}"
        )
            .prop_map(|(a, c, b)| format!("{a}{c}{b}")),
        prop::collection::vec(any::<char>(), 500..520).prop_map(|v| v.into_iter().collect()),
    ]
}

async fn relay_once(store: &SqliteStore, server: &TestServer, kind: EffectKind) {
    let spec = JobSpec::new("any_input", kind).timeout(Duration::from_secs(5));
    let guard = Guard::new(store.clone(), spec).unwrap();
    let dest = HttpDestination::new(&server.base_url(), Duration::from_secs(5)).unwrap();
    let config = RelayConfig {
        workers: 1,
        poll: Duration::from_millis(5),
        drain: true,
        ..RelayConfig::default()
    };
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    tokio::time::timeout(
        Duration::from_secs(30),
        Relay::new(&guard, &dest, config).run(stop),
    )
    .await
    .expect("the relay drained: no input may make it loop")
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn accepted_input_is_relayed_once_and_refused_input_leaves_nothing(
        op_key in key(),
        payload in json_value(),
        opaque in any::<bool>(),
    ) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("ops.db").display());
            let store = SqliteStore::connect(&url).await.unwrap();
            store.migrate().await.unwrap();
            let server = TestServer::start(Mode::Keyed).await.unwrap();
            let payload = Payload::from_value(&payload);

            match ops::enqueue(&store, "any_input", &op_key, &payload, None).await {
                Err(refused) => {
                    let named = refused.to_string();
                    assert!(named.contains("operation key"), "the error names the key: {named}");
                    relay_once(&store, &server, EffectKind::Keyed).await;
                    assert_eq!(server.posts(), 0, "a refused key was sent");
                    assert!(ops::get(&store, "any_input", &op_key).await.is_err(),
                        "a refused key left a record");
                }
                Ok(_) => {
                    let kind = if opaque { EffectKind::Opaque(StalePolicy::Hold) } else { EffectKind::Keyed };
                    relay_once(&store, &server, kind).await;
                    let snap = ops::get(&store, "any_input", &op_key).await.unwrap();
                    assert_eq!(snap.record.state, State::Completed, "{:?}", snap.record.error);
                    let idem = onceonly::idempotency_key("any_input", &op_key);
                    assert_eq!(server.effects(&idem), 1, "sent once under {idem:?}");
                }
            }
        });
    }
}
