//! Scenario 7: cancel while sending: an operator cancels while the worker holds the
//! claim and is about to send. The effect must end withdrawn at the
//! destination, or the record must say it could not be.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use onceonly::ops;
use onceonly::{Effect, EffectCtx, EffectOutcome, FaultAction, FaultHook, FaultPoint, State};
use tracing::instrument::WithSubscriber;

use super::{describe, describe_record, Ctx, Observed};
use crate::error::{Error, Result};
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

/// How long the sending worker waits at its claim for the operator.
const HOLD_WITHIN: Duration = Duration::from_secs(10);

/// The operator cancels without naming a destination: the worker holding
/// the claim is the one that must withdraw.
struct NoDestination;

impl Effect for NoDestination {
    async fn perform(&self, _ctx: &EffectCtx) -> EffectOutcome {
        EffectOutcome::NotSent("the operator has no destination".into())
    }
}

/// A hook that stops the worker right after its claim until the operator
/// has asked to cancel. It blocks its thread, so the runtime must be
/// multi-threaded (`block_in_place` hands the thread's other work away).
fn hold_after_claim(
    reached: tokio::sync::mpsc::UnboundedSender<()>,
    go: mpsc::Receiver<()>,
) -> FaultHook {
    let go = Mutex::new(go);
    Arc::new(move |point| {
        if point == FaultPoint::AfterClaim {
            let _ = reached.send(());
            tokio::task::block_in_place(|| {
                let _ = go.lock().unwrap().recv_timeout(HOLD_WITHIN);
            });
        }
        FaultAction::Continue
    })
}

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Observed> {
    let key = ctx.key("s7/guarded");
    let payload = ctx.payload(1);
    let mut obs = Observed::default();
    let (reached_tx, mut reached_rx) = tokio::sync::mpsc::unbounded_channel();
    let (go_tx, go_rx) = mpsc::channel();
    let guard = ctx
        .guard(&ctx.store, "sender")?
        .with_fault_hook(hold_after_claim(reached_tx, go_rx));
    let (job, k, p) = (ctx.job.clone(), key.clone(), payload.clone());
    let sending =
        tokio::spawn(async move { job.deliver(&guard, &k, &p).await }.with_current_subscriber());

    let reached = tokio::time::timeout(HOLD_WITHIN, reached_rx.recv()).await;
    let cancel = match reached {
        Ok(Some(())) => {
            let c =
                ops::cancel::<S, NoDestination>(&ctx.store, &ctx.spec.job_type, &key, None).await;
            format!("{c:?}")
        }
        _ => "the worker never reached its claim".to_owned(),
    };
    let _ = go_tx.send(());
    let outcome = sending
        .await
        .map_err(|e| Error::Job(format!("the sending worker panicked: {e}")))?;
    obs.check(
        "the cancel was requested while the claim was live",
        cancel.starts_with("Ok(Requested"),
        cancel.clone(),
    );
    obs.note(format!(
        "operator: {cancel}; worker: {}",
        describe(&outcome)
    ));

    let record = ctx.record(&key).await?;
    let effects = ctx.effects(&key).await?;
    let live = ctx.live(&key).await?;
    let seen = format!(
        "record {}; {effects} effect(s), {} live",
        describe_record(record.as_ref()),
        live.map_or_else(|| "? (the probe cannot tell)".to_owned(), |n| n.to_string())
    );
    obs.note(seen.clone());
    match record.as_ref().map(|r| r.state) {
        Some(State::Cancelled) => obs.check(
            "cancelled, and nothing of it live at the destination",
            live.unwrap_or(0) == 0,
            seen,
        ),
        Some(State::Completed) => {
            let says = record.as_ref().and_then(|r| r.error.clone());
            obs.check(
                "still completed, and the record says the withdraw failed",
                says.is_some(),
                says.unwrap_or_else(|| format!("{seen}; the record says nothing")),
            );
        }
        _ => {}
    }
    obs.count.add(live.unwrap_or(effects));
    obs.records.add(record.as_ref());
    Ok(obs)
}

/// The naive version has no claim an operator could flag: the cancel
/// reaches nobody, and the item stays live.
pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Count> {
    let key = ctx.key("s7/naive");
    ctx.deliver_naive(&ctx.naive(&ctx.store), &key, &ctx.payload(1))
        .await?;
    let live = ctx.live(&key).await?;
    let n = match live {
        Some(n) => n,
        None => ctx.effects(&key).await?,
    };
    Ok(Count::one(n))
}
