//! The relay loop's own promise about its statements: a round's
//! completions never hold up the loop's next claim.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onceonly::ops;
use onceonly::relay::{Relay, RelayConfig};
use onceonly::{EffectKind, State};

use super::intercept::Intercept;
use super::support::{guard, order, record};
use crate::effects::CountingEffect;
use crate::StoreFactory;

/// How long a completion waits for the loop's next claim to begin before
/// the case counts it as holding that claim up.
const OVERLAP_WAIT: Duration = Duration::from_secs(2);

/// A relay loop sends its next claim alongside the last round's
/// completions (they touch other rows), so it waits out one commit per
/// round, not two: every completion is still unanswered when the loop's
/// next claim begins. One loop, batch 1 (a fenced move each) and batch 2
/// (one batch completion); every operation ends completed, sent once.
pub async fn relay_claims_next_while_writing_back<F: StoreFactory>(factory: &F) {
    for batch in [1, 2] {
        let store = factory.fresh().await;
        let keys: Vec<String> = (0..4).map(|n| format!("op-{n}")).collect();
        for (n, key) in (0..).zip(&keys) {
            ops::enqueue(&store, "send", key, &order(n), None)
                .await
                .unwrap();
        }
        let mut relay_store = Intercept::new(store.clone());
        let begun = relay_store.claim_batches_begun.clone();
        // Per key, how many batch claims had begun when it was claimed.
        let claimed_after: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let held_up: Arc<Mutex<Vec<String>>> = Arc::default();
        relay_store.after_claim_batch = {
            let (begun, claimed_after) = (begun.clone(), claimed_after.clone());
            Arc::new(move |claimed| {
                let n = begun.load(Ordering::SeqCst);
                let mut seen = claimed_after.lock().unwrap();
                for (record, _) in claimed {
                    seen.insert(record.op_key, n);
                }
                Box::pin(async {})
            })
        };
        relay_store.before_completion = {
            let held_up = held_up.clone();
            Arc::new(move |keys| {
                let (begun, claimed_after, held_up) =
                    (begun.clone(), claimed_after.clone(), held_up.clone());
                Box::pin(async move {
                    for key in keys {
                        let claimed = claimed_after.lock().unwrap()[&key];
                        let deadline = Instant::now() + OVERLAP_WAIT;
                        while begun.load(Ordering::SeqCst) <= claimed {
                            if Instant::now() > deadline {
                                held_up.lock().unwrap().push(key.clone());
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                })
            })
        };
        let dest = CountingEffect::keyed();
        let relay_guard = guard(&relay_store, "send", EffectKind::Keyed);
        let config = RelayConfig {
            workers: 1,
            batch,
            poll: Duration::from_millis(20),
            drain: true,
        };
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        Relay::new(&relay_guard, &dest, config)
            .run(stop)
            .await
            .unwrap();
        for key in &keys {
            assert_eq!(
                record(&store, "send", key).await.state,
                State::Completed,
                "batch {batch}: {key}"
            );
            assert_eq!(dest.calls(key), 1, "batch {batch}: {key} sent once");
        }
        let held_up = held_up.lock().unwrap();
        assert!(
            held_up.is_empty(),
            "batch {batch}: completions the loop waited for before its next claim: {held_up:?}"
        );
    }
}
