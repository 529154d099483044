//! Scenario 6: two operations with similar data: the same payload under two keys
//! that differ only in case. Two operations, two effects.

use onceonly::Outcome;

use super::{describe, Ctx, Observed};
use crate::error::Result;
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

fn keys<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>, side: &str) -> [String; 2] {
    [
        ctx.key(&format!("s6/{side}/Order-7")),
        ctx.key(&format!("s6/{side}/order-7")),
    ]
}

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Observed> {
    let keys = keys(ctx, "guarded");
    let payload = ctx.payload(7);
    let guard = ctx.guard(&ctx.store, "worker")?;
    let mut obs = Observed::default();
    let mut said = Vec::new();
    let mut fresh = 0;
    for key in &keys {
        let outcome = ctx.job.deliver(&guard, key, &payload).await;
        fresh += usize::from(matches!(outcome, Ok(Outcome::Done { repeat: false, .. })));
        said.push(format!("{key}: {}", describe(&outcome)));
    }
    obs.check(
        "each operation was done by its own delivery, not taken for a repeat",
        fresh == 2,
        said.join(" / "),
    );
    obs.finish(ctx, &[&keys[0], &keys[1]]).await
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>) -> Result<Count> {
    let keys = keys(ctx, "naive");
    let payload = ctx.payload(7);
    let naive = ctx.naive(&ctx.store);
    let mut effects = 0;
    for key in &keys {
        ctx.deliver_naive(&naive, key, &payload).await?;
        effects += ctx.effects(key).await?;
    }
    Ok(Count::one(effects))
}
