//! The overview's counts and the lists' order through the library
//! (`onceonly::operator`), on SQLite and PostgreSQL, with the database's
//! clock moved instead of waiting: finished records and audit events count
//! within the window only, held ages grow with the clock, stuck claims are
//! the claims past their lease.

mod common;

use std::time::Duration;

use common::*;
use onceonly::operator::{self, OperatorStore, Which};
use onceonly::store::{OpClaim, OpMove};
use onceonly::{ops, AuditKind, Payload, State, Store};

const HOUR: Duration = Duration::from_secs(3600);

async fn finish<S: Store>(store: &S, job: &str, key: &str, to: State) {
    let payload = Payload::none();
    store
        .op_claim(&OpClaim {
            job_type: job,
            op_key: key,
            fingerprint: &payload.fingerprint,
            payload: None,
            owner: "w",
            lease: Duration::from_secs(30),
        })
        .await
        .unwrap();
    assert!(store
        .op_move(&OpMove::new(job, key, 1, State::Claimed, to))
        .await
        .unwrap());
}

async fn counts<S: OperatorStore + Clone>(store: S) {
    // Two hours ago: 3 completed, 1 failed, one held.
    for i in 0..3 {
        finish(&store, "mail", &format!("old-{i}"), State::Completed).await;
    }
    finish(&store, "mail", "old-f", State::Failed).await;
    held(&store, "mail", "held-old").await;
    store.clock_offset().advance(2 * HOUR);
    // Now: 2 completed, 1 cancelled (charge), one more held, a stuck claim,
    // a live claim, two queued.
    finish(&store, "mail", "new-0", State::Completed).await;
    finish(&store, "mail", "new-1", State::Completed).await;
    finish(&store, "charge", "new-c", State::Cancelled).await;
    held(&store, "charge", "held-new").await;
    dead_claim(&store, "charge", "stuck-1", &Payload::none()).await;
    let payload = Payload::none();
    store
        .op_claim(&OpClaim {
            job_type: "charge",
            op_key: "live-1",
            fingerprint: &payload.fingerprint,
            payload: None,
            owner: "w",
            lease: HOUR,
        })
        .await
        .unwrap();
    for k in ["q-1", "q-2"] {
        ops::enqueue(&store, "mail", k, &payload, None)
            .await
            .unwrap();
    }

    let o = operator::overview(&store, HOUR).await.unwrap();
    assert_eq!(o.job_types(), ["charge", "mail"]);
    assert_eq!(o.count("mail", State::Completed), 2, "only the last hour's");
    assert_eq!(o.count("mail", State::Failed), 0);
    assert_eq!(o.count("charge", State::Cancelled), 1);
    assert_eq!(o.count("mail", State::Queued), 2);
    assert_eq!(o.count("charge", State::Claimed), 2);
    assert_eq!((o.held(), o.stuck()), (2, 1));
    assert_eq!(o.stuck_of("charge"), 1);
    // The held one from two hours ago is the oldest.
    let oldest = o.oldest_held_age().unwrap();
    assert!(
        oldest >= 2 * HOUR && oldest < 2 * HOUR + Duration::from_secs(60),
        "{oldest:?}"
    );
    // The take-over into held appended in the window: one event.
    assert_eq!(o.events_of(AuditKind::TakeOver), 1);
    let wide = operator::overview(&store, 3 * HOUR).await.unwrap();
    assert_eq!(wide.count("mail", State::Completed), 5);
    assert_eq!(wide.count("mail", State::Failed), 1);
    assert_eq!(wide.events_of(AuditKind::TakeOver), 2);

    // Lists: oldest first; filtered; paged.
    let (held, now) = operator::list(&store, Which::Held, None, None, 0)
        .await
        .unwrap();
    let keys: Vec<&str> = held.iter().map(|r| r.op_key.as_str()).collect();
    assert_eq!(keys, ["held-old", "held-new"]);
    assert!(now >= held[1].updated_at);
    let (held, _) = operator::list(&store, Which::Held, Some("charge"), None, 0)
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    let (page2, _) = operator::list(&store, Which::Held, None, Some(1), 1)
        .await
        .unwrap();
    assert_eq!(page2[0].op_key, "held-new");
    let (stuck, _) = operator::list(&store, Which::Stuck, None, None, 0)
        .await
        .unwrap();
    let keys: Vec<&str> = stuck.iter().map(|r| r.op_key.as_str()).collect();
    assert_eq!(keys, ["stuck-1"], "the live claim is not stuck");
    // An hour on, the live claim's lease is over too.
    store.clock_offset().advance(HOUR + Duration::from_secs(1));
    let o = operator::overview(&store, HOUR).await.unwrap();
    assert_eq!(o.stuck(), 2);
    assert_eq!(
        o.count("mail", State::Completed),
        0,
        "out of the window now"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_counts_on_sqlite() {
    let (_, store) = sqlite().await;
    counts(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_counts_on_postgres() {
    let Some((_, store)) = postgres("overview_counts_on_postgres").await else {
        return;
    };
    counts(store).await;
}
