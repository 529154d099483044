//! Scenario 1: the same message delivered 3 times in a row.

use onceonly::Outcome;

use super::{describe, Ctx, Observed};
use crate::error::Result;
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

const DELIVERIES: usize = 3;

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Observed> {
    let key = ctx.key("s1/guarded");
    let payload = ctx.payload(1);
    let guard = ctx.guard(&ctx.store, "worker")?;
    let mut obs = Observed::default();
    let mut seen = Vec::new();
    for _ in 0..DELIVERIES {
        seen.push(ctx.job.deliver(&guard, &key, &payload).await);
    }
    let repeats = seen
        .iter()
        .filter(|o| matches!(o, Ok(Outcome::Done { repeat: true, .. })))
        .count();
    let said: Vec<String> = seen.iter().map(describe).collect();
    obs.check(
        "the 2nd and 3rd deliveries got the stored result",
        repeats == DELIVERIES - 1,
        said.join(" / "),
    );
    obs.note(format!("deliveries: {}", said.join(" / ")));
    obs.finish(ctx, &[&key]).await
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Count> {
    let key = ctx.key("s1/naive");
    let payload = ctx.payload(1);
    let naive = ctx.naive(&ctx.store);
    for _ in 0..DELIVERIES {
        ctx.deliver_naive(&naive, &key, &payload).await?;
    }
    Ok(Count::one(ctx.effects(&key).await?))
}
