//! A batch claim takes at most `limit` rows, also on a table PostgreSQL has
//! no statistics for yet (a fresh schema, a burst of enqueues before
//! autovacuum analyzes it). With the LIMIT … FOR UPDATE SKIP LOCKED subquery
//! joined in the UPDATE's FROM, the planner could put it on the inner side of
//! a nested loop and rescan it once per queued row: every rescan skipped the
//! rows already claimed and locked the next, so `limit 1` claimed the whole
//! queue (seen with `onceonly run --workers 4 --batch 1`: 296 of 300 rows
//! claimed at once).

use std::time::Duration;

use onceonly::store::{OpClaimBatch, OpEnqueue};
use onceonly::{Payload, Store};
use onceonly_postgres::{PgOptions, PgStore};

mod common;

#[tokio::test]
async fn a_batch_claim_takes_at_most_its_limit_on_a_fresh_table() {
    let test = "a_batch_claim_takes_at_most_its_limit_on_a_fresh_table";
    if !common::ready(test).await {
        return;
    }
    let options = PgOptions::default()
        .schema(common::new_schema())
        .max_connections(2);
    let store = PgStore::connect_with(&common::url(), options)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let payload = Payload::none();
    for i in 0..300 {
        let key = format!("k{i}");
        let p = OpEnqueue {
            job_type: "send",
            op_key: &key,
            fingerprint: &payload.fingerprint,
            payload: None,
            delay: None,
        };
        store.op_enqueue(&p).await.unwrap();
    }
    let mut claimed = 0;
    for limit in [1, 1, 7, 1, 64] {
        let batch = OpClaimBatch {
            job_type: "send",
            owner: "relay",
            lease: Duration::from_secs(30),
            limit,
        };
        let got = store.op_claim_batch(&batch).await.unwrap();
        assert_eq!(
            got.len(),
            limit as usize,
            "a claim with limit {limit} after {claimed} claimed of 300"
        );
        claimed += got.len();
    }
}
