//! Helpers the cases share: specs, payloads, fault hooks, record reads.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use onceonly::store::OpList;
use onceonly::{
    BoxError, EffectCtx, EffectKind, FaultAction, FaultHook, FaultPoint, Guard, JobSpec, Outcome,
    Payload, Record, StalePolicy, Store,
};
use serde_json::json;

use crate::StoreFactory;

/// The lease of every spec made here.
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// Far enough past [`LEASE`] that a claim taken now is stale.
pub(crate) const PAST_LEASE: Duration = Duration::from_secs(31);

/// Past the backoff of a claim released after its first attempt.
pub(crate) const RETRY_BACKOFF: Duration = Duration::from_millis(501);

/// Every effect kind that acts outside the database.
pub(crate) const REMOTE_KINDS: [EffectKind; 5] = [
    EffectKind::Keyed,
    EffectKind::Lookup,
    EffectKind::Opaque(StalePolicy::Hold),
    EffectKind::Opaque(StalePolicy::AtLeastOnce),
    EffectKind::Opaque(StalePolicy::AtMostOnce),
];

/// A job type naming the kind, so one database can hold every kind.
pub(crate) fn job_for(kind: EffectKind) -> String {
    match kind {
        EffectKind::Opaque(policy) => format!("opaque.{policy}"),
        other => other.name().to_owned(),
    }
}

/// A spec with [`LEASE`] and a 10s timeout.
pub(crate) fn spec(job_type: &str, kind: EffectKind) -> JobSpec {
    JobSpec::new(job_type, kind)
        .lease(LEASE)
        .timeout(Duration::from_secs(10))
}

/// A guard on `store` with [`spec`].
pub(crate) fn guard<S: Store + Clone>(store: &S, job_type: &str, kind: EffectKind) -> Guard<S> {
    Guard::new(store.clone(), spec(job_type, kind)).unwrap()
}

/// A fault hook that crashes at `point` and nowhere else.
pub(crate) fn crash_at(point: FaultPoint) -> FaultHook {
    Arc::new(move |at| {
        if at == point {
            FaultAction::Crash
        } else {
            FaultAction::Continue
        }
    })
}

/// The payload `{"order": n}`.
pub(crate) fn order(n: u64) -> Payload {
    Payload::from_value(&json!({ "order": n }))
}

/// The record, which must exist.
pub(crate) async fn record<S: Store>(store: &S, job_type: &str, op_key: &str) -> Record {
    onceonly::ops::get(store, job_type, op_key)
        .await
        .unwrap_or_else(|e| panic!("reading {job_type}:{op_key}: {e}"))
        .record
}

/// Every record in the database.
pub(crate) async fn all_records<S: Store>(store: &S) -> Vec<Record> {
    store.op_list(&OpList::default()).await.unwrap()
}

/// True for a first, acting completion.
pub(crate) fn is_first_done(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Done { repeat: false, .. })
}

/// The future a local effect returns.
pub(crate) type LocalFuture<'c> =
    Pin<Box<dyn Future<Output = Result<serde_json::Value, BoxError>> + Send + 'c>>;

/// A local effect: one row for the operation in the user table, written on
/// the transaction's connection.
pub(crate) fn local_write<F: StoreFactory>(
) -> impl for<'c> FnOnce(&'c mut <F::S as Store>::Conn, &'c EffectCtx) -> LocalFuture<'c> + Send + 'static
{
    |conn, ctx| {
        Box::pin(async move {
            F::local_insert(conn, &ctx.op_key).await?;
            Ok(json!({ "rows": 1 }))
        })
    }
}
