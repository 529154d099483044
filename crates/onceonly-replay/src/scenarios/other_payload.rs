//! Scenario 9: the same key with another payload is refused, not taken for a repeat.

use onceonly::Error;

use super::{describe, Ctx, Observed};
use crate::error::Result;
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Observed> {
    let key = ctx.key("s9/guarded");
    let guard = ctx.guard(&ctx.store, "worker")?;
    let mut obs = Observed::default();
    let first = ctx.job.deliver(&guard, &key, &ctx.payload(1)).await;
    obs.note(format!("payload 1: {}", describe(&first)));
    let other = ctx.job.deliver(&guard, &key, &ctx.payload(2)).await;
    obs.note(format!(
        "payload 2 under the same key: {}",
        describe(&other)
    ));
    obs.check(
        "the other payload was refused as a key reused by another operation",
        matches!(other, Err(Error::PayloadMismatch { .. })),
        describe(&other),
    );
    obs.finish(ctx, &[&key]).await
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Count> {
    let key = ctx.key("s9/naive");
    let naive = ctx.naive(&ctx.store);
    ctx.deliver_naive(&naive, &key, &ctx.payload(1)).await?;
    // The naive version cannot tell: it skips or redoes, never refuses.
    ctx.deliver_naive(&naive, &key, &ctx.payload(2)).await?;
    Ok(Count::one(ctx.effects(&key).await?))
}
