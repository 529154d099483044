//! Scenario 5: a claim younger than its lease is not taken over; an older one
//! follows the policy. The first worker dies right after its claim; a
//! redelivery at half the lease must leave the claim alone, one after the
//! lease must settle it as the effect kind and policy say.

use std::time::Duration;

use onceonly::{EffectKind, FaultAction, FaultPoint, Outcome, State};
use tokio::sync::oneshot;

use super::{describe, describe_record, Ctx, Observed};
use crate::error::Result;
use crate::job::{Reconnect, ReplayJob};
use crate::naive::NaiveHook;
use crate::report::Count;

/// How long the naive scenario waits for its first worker to read its state.
const READ_WITHIN: Duration = Duration::from_secs(10);

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Observed> {
    let key = ctx.key("s5/guarded");
    let payload = ctx.payload(1);
    let mut obs = Observed::default();
    let first = ctx
        .job
        .deliver(&ctx.dying_guard(FaultPoint::AfterClaim)?, &key, &payload)
        .await;
    obs.note(format!("first worker: {}", describe(&first)));
    let claimed = ctx.record(&key).await?;
    obs.note(format!("its claim: {}", describe_record(claimed.as_ref())));

    let half = ctx.spec.lease / 2;
    ctx.advance(half);
    let other = ctx.guard(&ctx.store, "redelivery")?;
    let young = ctx.job.deliver(&other, &key, &payload).await;
    let young_effects = ctx.effects(&key).await?;
    let after_young = ctx.record(&key).await?;
    let said = format!(
        "at {}ms into a {}ms lease: {}; {young_effects} effect(s); record {}",
        half.as_millis(),
        ctx.spec.lease.as_millis(),
        describe(&young),
        describe_record(after_young.as_ref())
    );
    obs.note(said.clone());
    if ctx.spec.effect == EffectKind::Local {
        // The claim rolled back with the dead worker's transaction: there is
        // no young claim to respect, and the redelivery does the work.
        obs.check(
            "no local claim outlives its transaction: the redelivery did it",
            matches!(young, Ok(Outcome::Done { repeat: false, .. })),
            said,
        );
    } else {
        let untouched = match (&claimed, &after_young) {
            (Some(a), Some(b)) => a.token == b.token && b.state == State::Claimed,
            _ => false,
        };
        obs.check(
            "a claim younger than its lease was left alone",
            matches!(young, Ok(Outcome::InProgress { .. })) && young_effects == 0 && untouched,
            said,
        );
    }

    ctx.advance(ctx.spec.lease - half + Duration::from_secs(1));
    let old = ctx.job.deliver(&other, &key, &payload).await;
    obs.note(format!("past the lease: {}", describe(&old)));
    obs.check(
        "the redelivery past the lease returned without error",
        old.is_ok(),
        describe(&old),
    );
    obs.finish(ctx, &[&key]).await
}

/// A naive hook that stops the first worker after its read until told to go on.
fn pause_after_read(reached: oneshot::Sender<()>, go: oneshot::Receiver<()>) -> NaiveHook {
    let gate = std::sync::Arc::new(std::sync::Mutex::new(Some((reached, go))));
    std::sync::Arc::new(move |point| {
        let gate = gate.clone();
        Box::pin(async move {
            let taken = gate.lock().unwrap().take();
            if let (FaultPoint::AfterClaim, Some((reached, go))) = (point, taken) {
                let _ = reached.send(());
                let _ = tokio::time::timeout(READ_WITHIN, go).await;
            }
            FaultAction::Continue
        })
    })
}

/// The naive version has no claim and no lease: while its first worker is
/// still at work, a redelivery acts as well.
pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Count> {
    let key = ctx.key("s5/naive");
    let payload = ctx.payload(1);
    let (reached_tx, reached_rx) = oneshot::channel();
    let (go_tx, go_rx) = oneshot::channel();
    let slow = ctx
        .naive(&ctx.store)
        .with_hook(pause_after_read(reached_tx, go_rx));
    let second = ctx.naive(&ctx.store);
    let first = ctx.job.deliver_naive(&slow, &key, &payload);
    let redelivery = async {
        if tokio::time::timeout(READ_WITHIN, reached_rx).await.is_ok() {
            let _ = ctx.job.deliver_naive(&second, &key, &payload).await;
        }
        let _ = go_tx.send(());
    };
    let (first, ()) = tokio::join!(first, redelivery);
    let _ = first;
    Ok(Count::one(ctx.effects(&key).await?))
}
